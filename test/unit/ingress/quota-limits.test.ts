import { describe, expect, it } from 'vitest';
import { ReachError } from '@reach/core';
import {
  checkAgentId,
  defaultBurstFor,
  parseQuotaBody,
  quotaJson,
  retryAfterSeconds,
  takeTokens,
  type BucketState,
} from '../../../services/ingress/dist/quota-limits.js';

const DEFAULTS = { ratePerS: 100, burst: 200 };

function refusal(fn: () => unknown): ReachError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ReachError);
    return err as ReachError;
  }
  throw new Error('expected a refusal');
}

describe('PUT /v1/quotas body (parseQuotaBody)', () => {
  it('takes {rate_per_s, burst}', () => {
    expect(parseQuotaBody({ rate_per_s: 1000, burst: 1500 }, DEFAULTS)).toEqual({ ratePerS: 1000, burst: 1500 });
    expect(parseQuotaBody({ rate_per_s: 0.5, burst: 1 }, DEFAULTS)).toEqual({ ratePerS: 0.5, burst: 1 });
  });

  it("without a burst, gives the default's proportion (two seconds' worth by default), at least 1", () => {
    expect(parseQuotaBody({ rate_per_s: 1000 }, DEFAULTS)).toEqual({ ratePerS: 1000, burst: 2000 });
    expect(parseQuotaBody({ rate_per_s: 0.2, burst: null }, DEFAULTS)).toEqual({ ratePerS: 0.2, burst: 1 });
    expect(defaultBurstFor(7.3, { ratePerS: 10, burst: 10 })).toBe(8);
  });

  it.each([
    ['no body', undefined, 'body'],
    ['an array', [1], 'body'],
    ['no rate', { burst: 5 }, 'rate_per_s'],
    ['a rate as a string', { rate_per_s: '100' }, 'rate_per_s'],
    ['a zero rate', { rate_per_s: 0 }, 'rate_per_s'],
    ['a negative rate', { rate_per_s: -5 }, 'rate_per_s'],
    ['an absurd rate', { rate_per_s: 1e9 }, 'rate_per_s'],
    ['a zero burst', { rate_per_s: 10, burst: 0 }, 'burst'],
    ['a fractional burst', { rate_per_s: 10, burst: 2.5 }, 'burst'],
    ['a burst as a string', { rate_per_s: 10, burst: '20' }, 'burst'],
    ['an unknown field', { rate_per_s: 10, rate: 20 }, 'rate'],
  ])('refuses %s with 4101 naming the field', (_what, body, field) => {
    const err = refusal(() => parseQuotaBody(body, DEFAULTS));
    expect(err.code).toBe(4101);
    expect(err.httpStatus).toBe(400);
    expect(err.details).toEqual({ field });
    expect(err.message).toMatch(new RegExp(`^${field}: `));
  });

  it('accepts only agent ids as path parameters', () => {
    expect(checkAgentId('data.retriever.8f3a2c')).toBe('data.retriever.8f3a2c');
    expect(refusal(() => checkAgentId('has space')).details).toEqual({ field: 'agent_id' });
    expect(refusal(() => checkAgentId('{tag}')).code).toBe(4101);
  });

  it('shows a quota in the snake_case of the API', () => {
    expect(quotaJson('a', { ratePerS: 5, burst: 9 }, 'default', null)).toEqual({ agent_id: 'a', rate_per_s: 5, burst: 9, source: 'default', updated_at: null });
  });
});

describe('Retry-After', () => {
  it('is whole seconds, rounded up, never 0', () => {
    expect(retryAfterSeconds(0)).toBe(1);
    expect(retryAfterSeconds(7)).toBe(1);
    expect(retryAfterSeconds(1000)).toBe(1);
    expect(retryAfterSeconds(1001)).toBe(2);
    expect(retryAfterSeconds(59_500)).toBe(60);
  });
});

describe('token bucket step (takeTokens, the arithmetic of the Redis script)', () => {
  const limit = { ratePerS: 10, burst: 5 };

  it('starts full and admits exactly the burst at once, then says when a token is back', () => {
    let s: BucketState | undefined;
    const allowed: boolean[] = [];
    let last;
    for (let i = 0; i < 7; i++) {
      last = takeTokens(s, limit, 1000);
      s = last.state;
      allowed.push(last.allowed);
    }
    expect(allowed).toEqual([true, true, true, true, true, false, false]);
    expect(last!.waitMs).toBe(100); // one token at 10/s
  });

  it('refills at the rate, never above the burst', () => {
    const empty = { tokens: 0, atMs: 0 };
    expect(takeTokens(empty, limit, 250).state.tokens).toBeCloseTo(1.5); // 2.5 refilled, 1 taken
    expect(takeTokens(empty, limit, 60_000).state.tokens).toBe(4); // capped at 5, 1 taken
    const partial = takeTokens({ tokens: 0.25, atMs: 0 }, limit, 0);
    expect(partial).toMatchObject({ allowed: false, waitMs: 75 });
  });

  it('applies a lowered burst at once', () => {
    expect(takeTokens({ tokens: 100, atMs: 0 }, limit, 0).state.tokens).toBe(4);
  });

  it('gives a token back (cost -1), never above the burst', () => {
    expect(takeTokens({ tokens: 2, atMs: 0 }, limit, 0, -1)).toMatchObject({ allowed: true, state: { tokens: 3 } });
    expect(takeTokens({ tokens: 5, atMs: 0 }, limit, 0, -1).state.tokens).toBe(5);
  });

  it('credits no time when the clock goes backwards, and keeps the later time', () => {
    const r = takeTokens({ tokens: 1, atMs: 5000 }, limit, 4000);
    expect(r.state).toEqual({ tokens: 0, atMs: 5000 });
  });

  it('over any interval admits at most burst + rate × time', () => {
    let s: BucketState | undefined;
    let admitted = 0;
    // a hammering producer: one attempt every 3 ms for 2 s
    for (let t = 0; t <= 2000; t += 3) {
      const r = takeTokens(s, limit, t);
      s = r.state;
      if (r.allowed) admitted++;
    }
    expect(admitted).toBeLessThanOrEqual(limit.burst + limit.ratePerS * 2);
    expect(admitted).toBeGreaterThanOrEqual(limit.burst + limit.ratePerS * 2 - 1);
  });
});
