import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTracer, NOOP_SPAN, NOOP_TRACER, parseTraceparent, tracesUrl } from '@reach/tracing';
import { startOtlpReceiver, type OtlpReceiver } from '../../helpers/otlp-receiver.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN = '00f067aa0ba902b7';
const GIVEN = `00-${TRACE}-${SPAN}-01`;

describe('tracer off (REACH_OTLP_ENDPOINT empty)', () => {
  it('is the no-op tracer: one shared span, nothing reserved, nothing recorded', async () => {
    const tracer = await createTracer({ endpoint: '', service: 'test', instanceId: 'i-1' });
    expect(tracer).toBe(NOOP_TRACER);
    expect(tracer.enabled).toBe(false);
    const span = tracer.startSpan('route', { parent: GIVEN });
    expect(span).toBe(NOOP_SPAN);
    expect(span.traceparent).toBeUndefined();
    expect(tracer.reserve(GIVEN)).toBeUndefined();
    expect(() => {
      span.setAttributes({ a: 1 });
      span.fail({ code: 2001, message: 'x' });
      span.end();
      tracer.record('dispatch', { traceparent: GIVEN, startTime: 1, endTime: 2 });
    }).not.toThrow();
    await tracer.shutdown();
  });

  it('appends /v1/traces to a base endpoint only', () => {
    expect(tracesUrl('http://collector:4318')).toBe('http://collector:4318/v1/traces');
    expect(tracesUrl('http://collector:4318/')).toBe('http://collector:4318/v1/traces');
    expect(tracesUrl('http://collector:4318/v1/traces')).toBe('http://collector:4318/v1/traces');
  });
});

describe('tracer on: OTLP/HTTP export', () => {
  let receiver: OtlpReceiver;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    await receiver.close();
  });

  it('exports child spans, roots of the envelope trace, failures and reserved spans with the ids it handed out', async () => {
    const logs: string[] = [];
    const tracer = await createTracer({ endpoint: receiver.url, service: 'router', instanceId: 'router-test-1', onLog: (_l, m) => logs.push(m) });
    expect(tracer.enabled).toBe(true);
    expect(logs[0]).toContain(`${receiver.url}/v1/traces`);

    const child = tracer.startSpan('route', { parent: GIVEN, kind: 'consumer', attributes: { 'reach.rule': 'r1', skipped: undefined } });
    const c = parseTraceparent(child.traceparent)!;
    expect(c.traceId).toBe(TRACE);
    expect(c.spanId).not.toBe(SPAN);
    child.setAttributes({ 'reach.route.candidates': 3 });
    child.end();
    child.end(); // a second end is ignored

    const ROOT_TRACE = 'aaaabbbbccccddddeeeeffff00001111';
    const root = tracer.startSpan('ingest', { traceId: ROOT_TRACE, kind: 'server' });
    expect(parseTraceparent(root.traceparent)!.traceId).toBe(ROOT_TRACE);
    root.fail({ code: 2001, codeName: 'NO_ROUTE', message: 'nobody' });
    root.end();

    const reserved = tracer.reserve(child.traceparent)!;
    const r = parseTraceparent(reserved)!;
    expect(r.traceId).toBe(TRACE);
    const t0 = Date.now() - 250;
    tracer.record('dispatch', { traceparent: reserved, parent: child.traceparent, startTime: t0, endTime: t0 + 200, attributes: { 'reach.seq': 7 } });

    // An unsampled parent propagates (flags 00) but nothing is exported for it.
    const unsampled = tracer.startSpan('route', { parent: `00-${'12'.repeat(16)}-${SPAN}-00` });
    expect(parseTraceparent(unsampled.traceparent)!.flags).toBe(0);
    unsampled.end();

    await tracer.shutdown(); // flushes the batch
    expect(receiver.rejected).toEqual([]);
    const spans = receiver.spans;
    expect(spans.map((s) => s.name).sort()).toEqual(['dispatch', 'ingest', 'route']);
    for (const s of spans) {
      expect(s.service).toBe('reach-router');
      expect(s.instance).toBe('router-test-1');
    }
    const route = spans.find((s) => s.name === 'route')!;
    expect(route).toMatchObject({ traceId: TRACE, spanId: c.spanId, parentSpanId: SPAN, kind: 5, status: { code: 0 } });
    expect(route.attributes).toEqual({ 'reach.rule': 'r1', 'reach.route.candidates': 3 });
    const ingest = spans.find((s) => s.name === 'ingest')!;
    expect(ingest).toMatchObject({ traceId: ROOT_TRACE, parentSpanId: undefined, kind: 2, status: { code: 2 } });
    expect(ingest.status.message).toContain('2001 NO_ROUTE');
    expect(ingest.attributes).toMatchObject({ 'reach.error.code': 2001, 'reach.error.name': 'NO_ROUTE' });
    const dispatch = spans.find((s) => s.name === 'dispatch')!;
    expect(dispatch).toMatchObject({ traceId: TRACE, spanId: r.spanId, parentSpanId: c.spanId, attributes: { 'reach.seq': 7 } });
    expect(dispatch.startMs).toBe(t0);
    expect(dispatch.endMs).toBe(t0 + 200);
  });
});
