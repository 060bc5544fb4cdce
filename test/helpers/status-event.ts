import type { Producer } from 'kafkajs';
import type { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import { ulid } from 'ulid';
import { uniq } from './env.js';

export type StageState = 'PENDING' | 'ROUTED' | 'DELIVERING' | 'DELIVERED';

export interface StatusEventOptions {
  messageId?: string;
  state: StageState;
  createdAt: number;
  code?: number;
  agentId?: string;
  capability?: string;
  at?: number;
}

/** A status event as a stage writes it on reach.status.v1 (the tracker folds it into `messages`). */
export function statusEvent(o: StatusEventOptions): Record<string, unknown> & { message_id: string } {
  return {
    event_id: `evt_${ulid()}`,
    message_id: o.messageId ?? `msg_${ulid()}`,
    state: o.state,
    attempt: 0,
    at: o.at ?? Date.now(),
    service: o.state === 'PENDING' ? 'ingress' : o.state === 'ROUTED' ? 'router' : 'dispatcher',
    instance: uniq('it-status'),
    trace_id: uniq('trace'),
    producer: 'admin',
    message_type: 'task_request',
    capability: o.capability ?? uniq('rel_status').replace(/-/g, '_'),
    topic: null,
    target_agent_id: null,
    agent_id: o.agentId ?? null,
    parent_message_id: null,
    code: o.code ?? null,
    reason: null,
    detail_json: null,
    created_at: o.createdAt,
    expire_at: null,
    idempotency_key: null,
    session_id: null,
    correlation_id: null,
    request_id: null,
    reply_to: null,
    priority: 'NORMAL',
  };
}

/** Writes status events to reach.status.v1 (acks=-1), keyed by message id. */
export async function sendStatus(
  producer: Producer,
  registry: SchemaRegistry,
  ...events: Array<Record<string, unknown> & { message_id: string }>
): Promise<void> {
  const schemaId = await registry.getLatestSchemaId('reach.status.v1-value');
  const messages = await Promise.all(events.map(async (e) => ({ key: e.message_id, value: await registry.encode(schemaId, e) })));
  await producer.send({ topic: 'reach.status.v1', acks: -1, messages });
}
