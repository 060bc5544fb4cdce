import { newId } from '@reach/core';
import type { Envelope, MessageState, SchemaCodec, StatusEvent } from '@reach/envelope';
import { packTarget, TOPICS, valueSubject, type OutRecord, type PackTarget } from '@reach/kafka';

const STATUS_SUBJECT = valueSubject(TOPICS.status.name);
const BATCH_SUBJECT = valueSubject(TOPICS.statusBatches.name);

const packTargets = new WeakMap<SchemaCodec, PackTarget>();

/** The framing of a StatusBatch record under this codec's registry id. */
function batchTarget(codec: SchemaCodec): PackTarget {
  let t = packTargets.get(codec);
  if (!t) packTargets.set(codec, (t = packTarget(codec.schemaId(BATCH_SUBJECT))));
  return t;
}

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

/**
 * A status event, as an item for reach.status-batches.v1: produceAll packs the events that go
 * out in one request into one StatusBatch record (packages/kafka packItems). `value` is the
 * event's own framed encoding (as a reach.status.v1 record would carry it).
 */
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
  return { topic: TOPICS.statusBatches.name, key: e.message_id, value: codec.encode(STATUS_SUBJECT, value), packInto: batchTarget(codec) };
}
