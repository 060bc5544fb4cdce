import { describe, expect, it } from 'vitest';
import { newMessageId } from '@reach/core';
import type { Envelope, RoutedDelivery } from '@reach/envelope';
import {
  buildEntry,
  entryDeadline,
  entryMessageId,
  entryPartsOf,
  entrySeq,
  envelopeFromMessageJson,
  frameOf,
  headOf,
  midPrefix,
  parseHead,
} from '../../../services/dispatcher/dist/entry.js';
import { renewedAtSend } from '../../../services/dispatcher/dist/deadline-holds.js';

const TTL = 1800;

// A replay-buffer entry: a bookkeeping line, then the exact deliver frame of docs/design.md §4.
function envelope(overrides: Partial<Envelope> = {}): Envelope {
  return {
    message_id: newMessageId(),
    message_type: 'task_request',
    capability: 'parse_pdf',
    topic: null,
    target_agent_id: null,
    producer: 'agent.p',
    trace_id: 'trace-1',
    request_id: null,
    idempotency_key: 'k1',
    session_id: null,
    correlation_id: null,
    reply_to: 'agent.r',
    priority: 'HIGH',
    tags: ['t'],
    retryable: true,
    timeout_ms: 5000,
    created_at: 1_700_000_000_000,
    expire_at: null,
    schema_version: 2,
    content_type: 'application/json',
    payload: Buffer.from('{"doc":"a\\nb"}'),
    headers: { h: 'v' },
    ...overrides,
  };
}

function routed(env: Envelope, overrides: Partial<RoutedDelivery> = {}): RoutedDelivery {
  return {
    message_id: env.message_id,
    parent_message_id: null,
    agent_id: 'agent.a',
    attempt: 2,
    routed_at: 1_700_000_000_100,
    deadline_at: 1_700_000_010_100,
    budget_deadline_at: null,
    rule: null,
    envelope: env,
    ...overrides,
  };
}

describe('dispatcher buffer entries', () => {
  it('hold the deliver frame exactly as sent: seq, attempt, deadline (RFC 3339), message in JSON', () => {
    const env = envelope();
    const parts = entryPartsOf(routed(env), TTL, 1_700_000_000_000);
    const entry = buildEntry(parts.head, 42, parts.suffix);
    const frame = JSON.parse(frameOf(entry));
    expect(frame).toEqual({
      type: 'deliver',
      seq: 42,
      attempt: 2,
      deadline: '2023-11-14T22:13:30.100Z',
      message: expect.objectContaining({ message_id: env.message_id, payload: { doc: 'a\nb' }, created_at: '2023-11-14T22:13:20.000Z', priority: 'HIGH' }),
    });
    expect(frame.message.payload_b64).toBeUndefined();
    expect(entrySeq(entry)).toBe(42);
    expect(entryMessageId(entry)).toBe(env.message_id);
  });

  it('start with the prefix the ack script checks', () => {
    const env = envelope();
    const parts = entryPartsOf(routed(env), TTL, 1_700_000_000_000);
    expect(buildEntry(parts.head, 1, parts.suffix).startsWith(midPrefix(env.message_id))).toBe(true);
    expect(buildEntry(parts.head, 1, parts.suffix).startsWith(midPrefix(newMessageId()))).toBe(false);
  });

  it('carry a fan-out copy under its own id, with its parent', () => {
    const env = envelope();
    const copyId = newMessageId();
    const parts = entryPartsOf(routed(env, { message_id: copyId, parent_message_id: env.message_id }), TTL);
    const entry = buildEntry(parts.head, 1, parts.suffix);
    expect(parseHead(headOf(entry))).toMatchObject({ mid: copyId, parent: env.message_id, message: { message_id: copyId } });
    expect(JSON.parse(frameOf(entry)).message.message_id).toBe(copyId);
    expect(parts.envelope.message_id).toBe(copyId);
  });

  it('give binary payloads as payload_b64', () => {
    const parts = entryPartsOf(routed(envelope({ content_type: 'application/octet-stream', payload: Buffer.from([0, 255]) })), TTL);
    const frame = JSON.parse(frameOf(buildEntry(parts.head, 1, parts.suffix)));
    expect(frame.message.payload_b64).toBe('AP8=');
    expect(frame.message.payload).toBeUndefined();
  });

  it('keep in their head everything a status event and a later result need, without the payload', () => {
    const env = envelope({ expire_at: 1_700_000_150_000, timeout_ms: null });
    const parts = entryPartsOf(routed(env), TTL, 1_700_000_000_000);
    const head = parseHead(headOf(buildEntry(parts.head, 1, parts.suffix)))!;
    expect(head).toMatchObject({ mid: env.message_id, parent: null, attempt: 2, ctx_ttl_s: 150 });
    expect(head.message.payload).toBeUndefined();
    expect(head.message.payload_b64).toBeUndefined();
    const back = envelopeFromMessageJson(head.message);
    expect({ ...back, payload: undefined }).toEqual({ ...env, payload: undefined });
    expect(back.payload.length).toBe(0);
  });
});

describe('renewing an ack deadline as an entry goes out late', () => {
  // timeout_ms 5000 is the entry's ack window; stored with its deadline at routed_at + 10 s.
  const stored = (budgetAt: number | null) => {
    const parts = entryPartsOf(routed(envelope(), { deadline_at: 1_700_000_010_100, budget_deadline_at: budgetAt }), TTL, 1_700_000_000_000);
    return buildEntry(parts.head, 7, parts.suffix);
  };

  it('reads the deadline the deliver frame carries', () => {
    expect(entryDeadline(stored(null))).toBe(1_700_000_010_100);
    expect(entryDeadline('{"mid":"m"}\n{"type":"deliver","seq":1,"attempt":0,"deadline":"junk"}')).toBeUndefined();
  });

  it('keeps a fresh deadline, and gives a late entry its window from the send, never past its budget', () => {
    // 5 s window: a deadline at least 4 s away is fresh.
    expect(renewedAtSend(stored(null), 1_700_000_006_100, 10_000)).toBeUndefined();
    // Sent 9 s after its deadline was set (1.1 s left): the window from now.
    expect(renewedAtSend(stored(null), 1_700_000_009_000, 10_000)).toBe(1_700_000_014_000);
    // Past it altogether (waited behind unreleased entries): the same.
    expect(renewedAtSend(stored(null), 1_700_000_020_000, 10_000)).toBe(1_700_000_025_000);
    // Never past the message's budget.
    expect(renewedAtSend(stored(1_700_000_012_000), 1_700_000_009_000, 10_000)).toBe(1_700_000_012_000);
    expect(renewedAtSend('not an entry', 1_700_000_009_000, 10_000)).toBeUndefined();
  });
});
