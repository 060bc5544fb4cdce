import { newMessageId } from '@reach/core';
import type { Envelope, StatusEvent } from '@reach/envelope';
import { uniq } from './env.js';

/**
 * A complete reach.v1.Envelope in its Avro form, as an outside producer builds it (every field
 * of docs/design.md §2, optional ones null). Tests override what they care about.
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

/**
 * The same envelope typed for unit tests of pure logic: a capability message with an empty JSON
 * payload and a W3C-shaped trace id (traceparent derivation needs 32 hex digits).
 */
export function envelopeOf(overrides: Partial<Envelope> = {}): Envelope {
  return testEnvelope({
    capability: 'parse_pdf',
    trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
    payload: Buffer.from('{}'),
    ...overrides,
  }) as unknown as Envelope;
}

/**
 * A complete reach.v1.StatusEvent as a stage emits it (copied envelope fields null, NORMAL
 * priority). Tests give the message, state and times, and override what they care about.
 */
export function statusEventOf(fields: Pick<StatusEvent, 'event_id' | 'message_id' | 'state' | 'at' | 'created_at'> & Partial<StatusEvent>): StatusEvent {
  return {
    attempt: 0,
    service: 'test',
    instance: 'test-1',
    trace_id: 'trace',
    producer: 'test.producer',
    message_type: 'task_request',
    capability: 'parse_pdf',
    topic: null,
    target_agent_id: null,
    agent_id: null,
    parent_message_id: null,
    code: null,
    reason: null,
    detail_json: null,
    expire_at: null,
    idempotency_key: null,
    session_id: null,
    correlation_id: null,
    request_id: null,
    reply_to: null,
    priority: 'NORMAL',
    ...fields,
  };
}
