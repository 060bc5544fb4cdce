import { describe, expect, it } from 'vitest';
import { newMessageId } from '@reach/core';
import type { Envelope, RoutedDelivery } from '@reach/envelope';
import { NOOP_TRACER, type FinishedSpan, type Tracer } from '@reach/tracing';
import { buildEntry, entryPartsOf, entryTraceparent, frameOf, headOf, parseHead, parseWaitingEntry } from '../../../services/dispatcher/dist/entry.js';
import { parseAgentFrame } from '../../../services/dispatcher/dist/protocol.js';
import { deliveryTrace, recordDispatchSpan } from '../../../services/dispatcher/dist/dispatch-span.js';
import { testEnvelope } from '../../helpers/envelope.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const IN = `00-${TRACE}-00f067aa0ba902b7-01`;
const OWN = `00-${TRACE}-aaaaaaaaaaaaaaaa-01`;

const envelope = (overrides: Record<string, unknown>): Envelope => testEnvelope(overrides) as unknown as Envelope;

function routed(env: Envelope): RoutedDelivery {
  return {
    message_id: env.message_id,
    parent_message_id: null,
    agent_id: 'agent.a',
    attempt: 1,
    routed_at: 1_700_000_000_000,
    deadline_at: 1_700_000_010_000,
    budget_deadline_at: null,
    rule: null,
    envelope: env,
  };
}

/** A tracer that hands out OWN and remembers what it records. */
function recordingTracer(): Tracer & { recorded: Array<{ name: string; span: FinishedSpan }> } {
  const recorded: Array<{ name: string; span: FinishedSpan }> = [];
  return {
    enabled: true,
    recorded,
    startSpan: () => NOOP_TRACER.startSpan(''),
    reserve: () => OWN,
    record: (name, span) => recorded.push({ name, span }),
    shutdown: () => Promise.resolve(),
  };
}

describe('traceparent on deliver frames (dispatcher buffer entries)', () => {
  it('puts the delivery traceparent in the frame, before the message, and its context in the head', () => {
    // A payload that mentions a traceparent must never be taken for the frame's.
    const env = envelope({ message_id: newMessageId(), payload: Buffer.from(JSON.stringify({ traceparent: `00-${'9'.repeat(32)}-${'9'.repeat(16)}-01` })) });
    const parts = entryPartsOf(routed(env), 300, 1_700_000_000_000, { traceparent: OWN, parent: IN, startedAt: 1_700_000_000_005 });
    const entry = buildEntry(parts.head, 7, parts.suffix);
    const frame = JSON.parse(frameOf(entry)) as Record<string, unknown>;
    expect(frame).toMatchObject({ type: 'deliver', seq: 7, attempt: 1, traceparent: OWN });
    expect(Object.keys(frame)).toEqual(['type', 'seq', 'attempt', 'deadline', 'traceparent', 'message']);
    expect(entryTraceparent(entry)).toBe(OWN);
    expect(parseHead(headOf(entry))).toMatchObject({ mid: env.message_id, tp: OWN, tpp: IN, t0: 1_700_000_000_005 });
  });

  it('keeps frames and heads as they were without a trace context', () => {
    const env = envelope({ message_id: newMessageId(), payload: Buffer.from('{"traceparent":"x"}') });
    const parts = entryPartsOf(routed(env), 300, 1_700_000_000_000);
    const entry = buildEntry(parts.head, 1, parts.suffix);
    expect(Object.keys(JSON.parse(frameOf(entry)) as object)).toEqual(['type', 'seq', 'attempt', 'deadline', 'message']);
    expect(entryTraceparent(entry)).toBeUndefined();
    const head = JSON.parse(headOf(entry)) as Record<string, unknown>;
    expect(head).not.toHaveProperty('tp');
    expect(parseHead(headOf(entry))).toMatchObject({ tp: null, tpp: null, t0: null });
  });

  it('keeps the traceparent through a wait in a lane: the promotion script builds the frame from the message part', () => {
    const env = envelope({ message_id: newMessageId() });
    const parts = entryPartsOf(routed(env), 300, 1_700_000_000_000, { traceparent: OWN });
    // What buffer-scripts.ts stores for a waiting delivery, and how its promotion builds the entry.
    const member = `10000 0 1700000000000 1\n${parts.head}\n${parts.messagePart}`;
    expect(parseWaitingEntry(member)!.envelope().message_id).toBe(env.message_id);
    const promoted = `${parts.head}\n{"type":"deliver","seq":3,"attempt":1,"deadline":"2023-11-14T22:13:30.100Z"${parts.messagePart}`;
    expect(JSON.parse(frameOf(promoted))).toMatchObject({ seq: 3, traceparent: OWN, message: { message_id: env.message_id } });
    expect(entryTraceparent(promoted)).toBe(OWN);
  });
});

describe('the dispatch span', () => {
  it('carries the incoming traceparent unchanged when tracing is off, and reserves its own when on', () => {
    expect(deliveryTrace(NOOP_TRACER, IN, TRACE, 5)).toEqual({ traceparent: IN });
    expect(deliveryTrace(NOOP_TRACER, undefined, TRACE, 5)).toEqual({ traceparent: undefined });
    expect(deliveryTrace(recordingTracer(), IN, TRACE, 5)).toEqual({ traceparent: OWN, parent: IN, startedAt: 5 });
  });

  it('is recorded from the buffer entry head when the answer comes, with the outcome and the failure code', () => {
    const tracer = recordingTracer();
    const head = { mid: 'msg_1', parent: null, attempt: 2, ctx_ttl_s: 0, message: {}, tp: OWN, tpp: IN, t0: 1000 };
    recordDispatchSpan(tracer, head, 'agent.a', 'timeout', { seq: 9, error: { code: 3002, codeName: 'ACK_TIMEOUT', message: 'no ack' } }, 4000);
    expect(tracer.recorded).toEqual([
      {
        name: 'dispatch',
        span: expect.objectContaining({
          traceparent: OWN,
          parent: IN,
          startTime: 1000,
          endTime: 4000,
          error: { code: 3002, codeName: 'ACK_TIMEOUT', message: 'no ack' },
          attributes: expect.objectContaining({ 'reach.agent_id': 'agent.a', 'reach.attempt': 2, 'reach.seq': 9, 'reach.dispatch.outcome': 'timeout' }),
        }),
      },
    ]);
    // Delivered while tracing was off (no start recorded): nothing to record.
    recordDispatchSpan(tracer, { ...head, t0: null }, 'agent.a', 'ack');
    recordDispatchSpan(NOOP_TRACER, head, 'agent.a', 'ack');
    expect(tracer.recorded).toHaveLength(1);
  });
});

describe('traceparent on answer frames (WebSocket protocol, optional field)', () => {
  it('keeps a well-formed traceparent on ack, reject and result and ignores a malformed one', () => {
    expect(parseAgentFrame(JSON.stringify({ type: 'ack', seq: 1, message_id: 'm', traceparent: OWN }))).toMatchObject({ type: 'ack', traceparent: OWN });
    expect(parseAgentFrame(JSON.stringify({ type: 'reject', seq: 1, message_id: 'm', traceparent: OWN }))).toMatchObject({ type: 'reject', traceparent: OWN });
    expect(parseAgentFrame(JSON.stringify({ type: 'result', message_id: 'm', payload: 1, traceparent: OWN }))).toMatchObject({
      type: 'result',
      traceparent: OWN,
    });
    const bad = parseAgentFrame(JSON.stringify({ type: 'ack', seq: 1, message_id: 'm', traceparent: 'garbage' }));
    expect(bad).toMatchObject({ type: 'ack', seq: 1 });
    expect((bad as { traceparent?: string }).traceparent).toBeUndefined();
    expect(parseAgentFrame(JSON.stringify({ type: 'ack', seq: 1, message_id: 'm', traceparent: 42 }))).toMatchObject({ type: 'ack' });
  });
});
