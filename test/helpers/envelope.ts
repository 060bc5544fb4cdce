import { newMessageId } from '@reach/core';
import { uniq } from './env.js';

/**
 * A complete reach.v1.Envelope in its Avro form, as an outside producer builds it (every field
 * of DESIGN §2, optional ones null). Tests override what they care about.
 */
export function testEnvelope(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    message_id: newMessageId(),
    message_type: 'task_request',
    capability: null,
    topic: null,
    target_agent_id: null,
    producer: 'admin',
    trace_id: uniq('trace'),
    request_id: null,
    idempotency_key: null,
    session_id: null,
    correlation_id: null,
    reply_to: null,
    priority: 'NORMAL',
    tags: [],
    retryable: true,
    timeout_ms: null,
    created_at: Date.now(),
    expire_at: null,
    schema_version: 1,
    content_type: 'application/json',
    payload: Buffer.from(JSON.stringify({ n: 1 })),
    headers: {},
    ...overrides,
  };
}
