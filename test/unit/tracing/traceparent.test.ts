import { describe, expect, it } from 'vitest';
import { childTraceparent, formatTraceparent, isTraceId, isValidTraceparent, parseTraceparent, randomSpanId, withTraceparent } from '@reach/tracing';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN = '00f067aa0ba902b7';
const GIVEN = `00-${TRACE}-${SPAN}-01`;

describe('W3C traceparent', () => {
  it('parses well-formed values and refuses the invalid ones the spec names', () => {
    expect(parseTraceparent(GIVEN)).toEqual({ traceId: TRACE, spanId: SPAN, flags: 1 });
    expect(parseTraceparent(` ${GIVEN} `)).toEqual({ traceId: TRACE, spanId: SPAN, flags: 1 });
    expect(parseTraceparent(`00-${TRACE}-${SPAN}-00`)?.flags).toBe(0);
    for (const bad of [
      undefined,
      '',
      'garbage',
      `ff-${TRACE}-${SPAN}-01`, // version ff is invalid
      `00-${'0'.repeat(32)}-${SPAN}-01`, // all-zero trace id
      `00-${TRACE}-${'0'.repeat(16)}-01`, // all-zero parent id
      `00-${TRACE.toUpperCase()}-${SPAN}-01`, // upper-case hex
      `00-${TRACE}-${SPAN}-01-extra`, // version 00 has exactly four fields
      `00-${TRACE.slice(1)}-${SPAN}-01`,
    ]) {
      expect(parseTraceparent(bad), String(bad)).toBeUndefined();
      expect(isValidTraceparent(bad)).toBe(false);
    }
    // A later version may add fields: its first four are read.
    expect(parseTraceparent(`01-${TRACE}-${SPAN}-01-more`)).toEqual({ traceId: TRACE, spanId: SPAN, flags: 1 });
  });

  it('formats a context back to the same string', () => {
    expect(formatTraceparent(parseTraceparent(GIVEN)!)).toBe(GIVEN);
    expect(formatTraceparent({ traceId: TRACE, spanId: SPAN, flags: 0 })).toBe(`00-${TRACE}-${SPAN}-00`);
  });

  it('makes children that keep the trace and the sampled flag, with a new span id', () => {
    const child = childTraceparent(GIVEN)!;
    const c = parseTraceparent(child)!;
    expect(c.traceId).toBe(TRACE);
    expect(c.flags).toBe(1);
    expect(c.spanId).not.toBe(SPAN);
    expect(parseTraceparent(childTraceparent(`00-${TRACE}-${SPAN}-00`))!.flags).toBe(0);
    expect(childTraceparent(GIVEN, undefined, 'aaaaaaaaaaaaaaaa')).toBe(`00-${TRACE}-aaaaaaaaaaaaaaaa-01`);
  });

  it('starts a sampled root of a W3C trace id when there is no valid parent, else nothing', () => {
    expect(childTraceparent(undefined, TRACE)).toMatch(new RegExp(`^00-${TRACE}-[0-9a-f]{16}-01$`));
    expect(childTraceparent('garbage', TRACE.toUpperCase())).toMatch(new RegExp(`^00-${TRACE}-`));
    expect(childTraceparent(undefined, 'trace-123')).toBeUndefined();
    expect(childTraceparent(undefined, '0'.repeat(32))).toBeUndefined();
    expect(childTraceparent(undefined)).toBeUndefined();
    expect(isTraceId(TRACE)).toBe(true);
    expect(isTraceId('0'.repeat(32))).toBe(false);
  });

  it('draws non-zero random span ids', () => {
    const ids = new Set(Array.from({ length: 100 }, () => randomSpanId()));
    expect(ids.size).toBe(100);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{16}$/);
  });

  it('re-points exactly the records that carried the incoming traceparent, and allocates nothing when off', () => {
    const child = `00-${TRACE}-${'b'.repeat(16)}-01`;
    const records: Array<{ topic: string; headers?: Record<string, string> }> = [
      { topic: 'a', headers: { traceparent: GIVEN, other: 'x' } },
      { topic: 'status' },
      { topic: 'b', headers: { traceparent: `00-${TRACE}-${'c'.repeat(16)}-01` } },
    ];
    const out = withTraceparent(records, GIVEN, child);
    expect(out[0]).toEqual({ topic: 'a', headers: { traceparent: child, other: 'x' } });
    expect(out[1]).toBe(records[1]);
    expect(out[2]).toBe(records[2]);
    expect(records[0]!.headers!.traceparent).toBe(GIVEN); // the input is not mutated
    expect(withTraceparent(records, GIVEN, undefined)).toBe(records);
    expect(withTraceparent(records, undefined, child)).toBe(records);
    expect(withTraceparent(records, GIVEN, GIVEN)).toBe(records);
  });
});
