import { newId } from '@reach/core';
import type { Envelope, MessageState, SchemaCodec, StatusEvent } from '@reach/envelope';
import { TOPICS, valueSubject, type OutRecord } from '@reach/kafka';

const STATUS_SUBJECT = valueSubject(TOPICS.status.name);

export interface StatusInput {
  state: MessageState;
  envelope: Envelope;
  service: string;
  instance: string;
  attempt?: number;
  agentId?: string | null;
  parentMessageId?: string | null;
  code?: number | null;
  reason?: string | null;
  /** Stage detail for the timeline (routing candidates and scores, rule, ...). */
  detail?: unknown;
}

/** A reach.status.v1 record (key = message_id, so one message's events stay in order). */
export function statusRecord(codec: SchemaCodec, s: StatusInput, now: number = Date.now()): OutRecord {
  const e = s.envelope;
  const value: StatusEvent = {
    event_id: newId('evt', now),
    message_id: e.message_id,
    state: s.state,
    attempt: s.attempt ?? 0,
    at: now,
    service: s.service,
    instance: s.instance,
    trace_id: e.trace_id,
    producer: e.producer,
    message_type: e.message_type,
    capability: e.capability,
    topic: e.topic,
    target_agent_id: e.target_agent_id,
    agent_id: s.agentId ?? null,
    parent_message_id: s.parentMessageId ?? null,
    code: s.code ?? null,
    reason: s.reason ?? null,
    detail_json: s.detail === undefined ? null : JSON.stringify(s.detail),
    created_at: e.created_at,
    expire_at: e.expire_at,
    idempotency_key: e.idempotency_key,
    session_id: e.session_id,
    correlation_id: e.correlation_id,
    request_id: e.request_id,
    reply_to: e.reply_to,
    priority: e.priority,
  };
  return { topic: TOPICS.status.name, key: e.message_id, value: codec.encode(STATUS_SUBJECT, value) };
}
