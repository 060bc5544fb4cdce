import type { Producer } from 'kafkajs';
import type { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import { ulid } from 'ulid';
import type { StatusEvent } from '@reach/envelope';
import { uniq } from './env.js';
import { statusEventOf } from './envelope.js';

export interface StatusEventOptions {
  messageId?: string;
  state: StatusEvent['state'];
  createdAt: number;
  code?: number;
  agentId?: string;
  capability?: string;
  at?: number;
}

/** A status event as a stage writes it on reach.status.v1 (the tracker folds it into `messages`). */
export function statusEvent(o: StatusEventOptions): StatusEvent {
  return statusEventOf({
    event_id: `evt_${ulid()}`,
    message_id: o.messageId ?? `msg_${ulid()}`,
    state: o.state,
    at: o.at ?? Date.now(),
    created_at: o.createdAt,
    service: o.state === 'PENDING' ? 'ingress' : o.state === 'ROUTED' ? 'router' : 'dispatcher',
    instance: uniq('it-status'),
    trace_id: uniq('trace'),
    producer: 'admin',
    capability: o.capability ?? uniq('rel_status').replace(/-/g, '_'),
    agent_id: o.agentId ?? null,
    code: o.code ?? null,
  });
}

/** Writes status events to reach.status.v1 (acks=-1), keyed by message id. */
export async function sendStatus(producer: Producer, registry: SchemaRegistry, ...events: StatusEvent[]): Promise<void> {
  const schemaId = await registry.getLatestSchemaId('reach.status.v1-value');
  const messages = await Promise.all(events.map(async (e) => ({ key: e.message_id, value: await registry.encode(schemaId, e) })));
  await producer.send({ topic: 'reach.status.v1', acks: -1, messages });
}
