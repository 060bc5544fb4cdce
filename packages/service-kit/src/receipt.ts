import { errorInfo, newMessageId } from '@reach/core';
import type { Envelope, MessageState, SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type OutRecord } from '@reach/kafka';

export const RECEIPT_MESSAGE_TYPE = 'reach.receipt';
const PENDING_SUBJECT = valueSubject(TOPICS.pending.name);

/**
 * A failure receipt for the producer of a message that was rejected or died: a message of
 * type `reach.receipt` addressed to the producer (or its reply_to), correlated with the
 * original message id, delivered like any other message. No receipt is ever sent about a
 * receipt, so a producer that cannot be reached cannot cause a loop.
 */
export function receiptRecord(
  codec: SchemaCodec,
  original: Envelope,
  outcome: { state: MessageState; code: number; reason: string },
  now: number = Date.now(),
): OutRecord | undefined {
  if (original.message_type === RECEIPT_MESSAGE_TYPE) return undefined;
  const body = { message_id: original.message_id, status: outcome.state, code: outcome.code, name: errorInfo(outcome.code).name, reason: outcome.reason };
  const receipt: Envelope = {
    message_id: newMessageId(now),
    message_type: RECEIPT_MESSAGE_TYPE,
    capability: null,
    topic: null,
    target_agent_id: original.reply_to ?? original.producer,
    producer: 'reach',
    trace_id: original.trace_id,
    request_id: original.request_id,
    idempotency_key: null,
    session_id: null,
    correlation_id: original.message_id,
    reply_to: null,
    priority: original.priority,
    tags: [],
    retryable: true,
    timeout_ms: null,
    created_at: now,
    expire_at: null,
    schema_version: 1,
    content_type: 'application/json',
    payload: Buffer.from(JSON.stringify(body)),
    headers: {},
  };
  return { topic: TOPICS.pending.name, key: receipt.message_id, value: codec.encode(PENDING_SUBJECT, receipt) };
}
