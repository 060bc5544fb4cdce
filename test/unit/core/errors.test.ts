import { describe, expect, it } from 'vitest';
import { ERROR_CODES, NonRetryableError, ReachError, errorInfo, isKnownCode, toReachError } from '@reach/core';

/** docs/design.md §6, verbatim (public contract). */
const DESIGN_6: ReadonlyArray<[number, string]> = [
  [1001, 'CONNECT_TIMEOUT'],
  [1002, 'CONNECTION_CLOSED'],
  [1003, 'AUTH_FAILED'],
  [1004, 'HEARTBEAT_TIMEOUT'],
  [2001, 'NO_ROUTE'],
  [2002, 'SATURATED'],
  [2003, 'DOMAIN_DENIED'],
  [3001, 'CIRCUIT_OPEN'],
  [3002, 'ACK_TIMEOUT'],
  [3003, 'AGENT_REJECTED'],
  [3004, 'RETRIES_EXHAUSTED'],
  [3005, 'BUDGET_EXCEEDED'],
  [3006, 'EXPIRED'],
  [4101, 'INVALID_ENVELOPE'],
  [4102, 'PAYLOAD_TOO_LARGE'],
  [4103, 'UNKNOWN_SCHEMA'],
  [4104, 'INVALID_REGISTRATION'],
  [4129, 'RATE_LIMITED'],
  [5001, 'INTERNAL'],
  [5002, 'DEPENDENCY_UNAVAILABLE'],
];

/** Codes added to docs/design.md §6 compatibly, each documented in the README's error table and its docs/ page. */
const ADDITIONS: ReadonlyArray<[number, string]> = [
  // docs/a2a.md: the outcome of an A2A CancelTask (issue #29)
  [3007, 'CANCELED'],
];

describe('error code table', () => {
  it('holds docs/design.md §6 exactly, in order, plus only the documented additions', () => {
    const design = new Set(DESIGN_6.map(([code]) => code));
    expect(ERROR_CODES.filter((e) => design.has(e.code)).map((e) => [e.code, e.name])).toEqual(DESIGN_6);
    expect(ERROR_CODES.filter((e) => !design.has(e.code)).map((e) => [e.code, e.name])).toEqual(ADDITIONS);
  });

  it('has unique codes and unique names', () => {
    expect(new Set(ERROR_CODES.map((e) => e.code)).size).toBe(ERROR_CODES.length);
    expect(new Set(ERROR_CODES.map((e) => e.name)).size).toBe(ERROR_CODES.length);
  });

  it('gives every code an HTTP status, a description and a retry policy', () => {
    for (const e of ERROR_CODES) {
      expect(e.httpStatus, e.name).toBeGreaterThanOrEqual(400);
      expect(e.httpStatus, e.name).toBeLessThan(600);
      expect(e.description.length, e.name).toBeGreaterThan(10);
      expect(typeof e.retryable, e.name).toBe('boolean');
    }
    // The statuses the public API promises (docs/design.md §3).
    expect(errorInfo('PAYLOAD_TOO_LARGE').httpStatus).toBe(413);
    expect(errorInfo('RATE_LIMITED').httpStatus).toBe(429);
    expect(errorInfo('INVALID_ENVELOPE').httpStatus).toBe(400);
    expect(errorInfo('DEPENDENCY_UNAVAILABLE').retryable).toBe(true);
    expect(errorInfo('UNKNOWN_SCHEMA').retryable).toBe(false);
  });

  it('looks codes up by name and number', () => {
    for (const [code, name] of DESIGN_6) {
      expect(errorInfo(code).name).toBe(name);
      expect(errorInfo(name as never).code).toBe(code);
      expect(isKnownCode(code)).toBe(true);
    }
    expect(isKnownCode(4100)).toBe(false);
    expect(() => errorInfo(9999)).toThrow(/unknown error code 9999/);
  });
});

describe('ReachError', () => {
  it('carries the table entry and serialises to the docs/design.md §3 body {error:{code,name,message}}', () => {
    const err = new ReachError('NO_ROUTE', 'no live agent offers capability summarize');
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('ReachError');
    expect(err.code).toBe(2001);
    expect(err.codeName).toBe('NO_ROUTE');
    expect(err.httpStatus).toBe(404);
    expect(err.retryable).toBe(false);
    expect(err.toBody()).toStrictEqual({ error: { code: 2001, name: 'NO_ROUTE', message: 'no live agent offers capability summarize' } });
    expect(JSON.parse(JSON.stringify(err.toBody()))).toEqual({ error: { code: 2001, name: 'NO_ROUTE', message: 'no live agent offers capability summarize' } });
  });

  it('adds details to the body only when given, and keeps the cause', () => {
    const cause = new Error('boom');
    const err = new ReachError('INVALID_ENVELOPE', 'bad', { details: { field: 'topic' }, cause });
    expect(err.toBody()).toStrictEqual({ error: { code: 4101, name: 'INVALID_ENVELOPE', message: 'bad', details: { field: 'topic' } } });
    expect(err.cause).toBe(cause);
  });

  it('retryable defaults to the table and can be overridden', () => {
    expect(new ReachError('ACK_TIMEOUT', 'x').retryable).toBe(true);
    expect(new ReachError('AGENT_REJECTED', 'x').retryable).toBe(false);
    expect(new ReachError('AGENT_REJECTED', 'x', { retryable: true }).retryable).toBe(true);
    const nr = new NonRetryableError('ACK_TIMEOUT', 'x');
    expect(nr).toBeInstanceOf(ReachError);
    expect(nr.retryable).toBe(false);
    expect(nr.code).toBe(3002);
  });

  it('toReachError keeps ReachErrors and turns anything else into a retryable 5001 INTERNAL', () => {
    const keep = new ReachError('EXPIRED', 'late');
    expect(toReachError(keep)).toBe(keep);
    const wrapped = toReachError(new TypeError('undefined is not a function'));
    expect(wrapped.code).toBe(5001);
    expect(wrapped.codeName).toBe('INTERNAL');
    expect(wrapped.retryable).toBe(true);
    expect(wrapped.message).toBe('undefined is not a function');
    expect(toReachError('a string').message).toBe('a string');
  });
});
