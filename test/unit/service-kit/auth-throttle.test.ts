import { describe, expect, it } from 'vitest';
import { AuthFailureThrottle } from '@reach/service-kit';

// Issue #13: failed authentications per source address are rate-limited (brute-force protection).
describe('AuthFailureThrottle', () => {
  it('blocks an address once it reached the limit within a window, until the window ends', () => {
    const t = new AuthFailureThrottle({ limit: 3, windowMs: 60_000 });
    for (let i = 0; i < 2; i++) t.failed('10.0.0.1', 1000 + i);
    expect(t.retryAfterS('10.0.0.1', 1002)).toBeUndefined();
    t.failed('10.0.0.1', 1002);
    expect(t.retryAfterS('10.0.0.1', 1002)).toBe(60);
    expect(t.retryAfterS('10.0.0.1', 60_500)).toBe(1); // never 0 while blocked
    expect(t.retryAfterS('10.0.0.1', 61_000)).toBeUndefined();
    // another address is not affected
    expect(t.retryAfterS('10.0.0.2', 1002)).toBeUndefined();
  });

  it('starts a new window after the old one ended', () => {
    const t = new AuthFailureThrottle({ limit: 2, windowMs: 1000 });
    t.failed('a', 0);
    t.failed('a', 999);
    expect(t.retryAfterS('a', 999)).toBe(1);
    t.failed('a', 1000);
    expect(t.retryAfterS('a', 1000)).toBeUndefined();
  });

  it('ignores requests without an address and bounds its memory', () => {
    const t = new AuthFailureThrottle({ limit: 1, windowMs: 1000, maxAddresses: 3 });
    t.failed(undefined, 0);
    expect(t.size).toBe(0);
    for (const a of ['a', 'b', 'c', 'd']) t.failed(a, 0);
    expect(t.size).toBe(3);
    expect(t.retryAfterS('a', 0)).toBeUndefined(); // the oldest was dropped
    expect(t.retryAfterS('d', 0)).toBe(1);
  });
});
