import { describe, expect, it } from 'vitest';
import { isValidTraceparent, traceparentFor } from '../../../services/ingress/dist/traceparent.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const GIVEN = `00-${TRACE}-00f067aa0ba902b7-01`;

describe('traceparent', () => {
  it('recognises well-formed W3C traceparents only', () => {
    expect(isValidTraceparent(GIVEN)).toBe(true);
    expect(isValidTraceparent(undefined)).toBe(false);
    expect(isValidTraceparent('00-xyz-00f067aa0ba902b7-01')).toBe(false);
    expect(isValidTraceparent(`ff-${TRACE}-00f067aa0ba902b7-01`)).toBe(false);
    expect(isValidTraceparent(`00-${'0'.repeat(32)}-00f067aa0ba902b7-01`)).toBe(false);
    expect(isValidTraceparent(`00-${TRACE}-${'0'.repeat(16)}-01`)).toBe(false);
  });

  it("carries the producer's traceparent unchanged", () => {
    expect(traceparentFor('something-else', GIVEN)).toBe(GIVEN);
  });

  it('starts one from a W3C trace_id, and none from other trace ids', () => {
    expect(traceparentFor(TRACE, undefined)).toMatch(new RegExp(`^00-${TRACE}-[0-9a-f]{16}-01$`));
    expect(traceparentFor(TRACE.toUpperCase(), 'garbage')).toMatch(new RegExp(`^00-${TRACE}-`));
    expect(traceparentFor('trace-123', undefined)).toBeUndefined();
    expect(traceparentFor('0'.repeat(32), undefined)).toBeUndefined();
  });
});
