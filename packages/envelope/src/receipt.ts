import { errorInfo, newMessageId } from '@reach/core';
import type { Envelope, MessageState } from './generated/schemas.js';

export const RECEIPT_MESSAGE_TYPE = 'reach.receipt';

/**
 * A failure receipt for the producer of a message that was rejected or died: a message of
 * type `reach.receipt` addressed to the producer (or its reply_to), correlated with the
 * original message id, delivered like any other message. No receipt is ever sent about a
 * receipt (undefined), so a producer that cannot be reached cannot cause a loop.
 */
export function receiptEnvelope(
  original: Envelope,
  outcome: { state: MessageState; code: number; reason: string },
  now: number = Date.now(),
): Envelope | undefined {
  if (original.message_type === RECEIPT_MESSAGE_TYPE) return undefined;
  const body = { message_id: original.message_id, status: outcome.state, code: outcome.code, name: errorInfo(outcome.code).name, reason: outcome.reason };
  return {
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
}
