import { describe, expect, it } from 'vitest';
import { AGENT_RECONNECT_BACKOFF } from '@reach/core';
import { rejoinWindowMs } from '../../../services/dispatcher/src/liveness.js';

// How long a restarted dispatcher waits before sweeping ack deadlines: its agents back off
// 1 s doubling (plus 20 % jitter) while it is away, so after D seconds down the last failed
// attempt's next delay is at most (D + 1 s) × 1.2, capped at 32 s × 1.2.
describe('rejoinWindowMs', () => {
  it('is one ack window when no instance died', () => {
    expect(rejoinWindowMs(10_000, undefined)).toBe(10_000);
  });

  it('is at least one ack window after a short downtime', () => {
    expect(rejoinWindowMs(10_000, 2_000)).toBe(10_000);
  });

  it('covers the backoff an agent reached during a long downtime', () => {
    // 10 s down: (10 + 1) × 1.2 = 13.2 s, plus 2 s for hello, welcome and resent answers.
    expect(rejoinWindowMs(10_000, 10_000)).toBe(15_200);
    expect(rejoinWindowMs(1_000, 10_000)).toBe(15_200);
  });

  it('never exceeds the largest backoff step plus the margin', () => {
    const cap = AGENT_RECONNECT_BACKOFF.maxMs * (1 + AGENT_RECONNECT_BACKOFF.jitter) + 2_000;
    expect(rejoinWindowMs(10_000, 3_600_000)).toBe(cap);
  });

  it('matches a simulated agent: the window always reaches its first attempt after the dispatcher is back', () => {
    // Worst case: every delay gets the full jitter.
    for (let down = 0; down <= 120_000; down += 250) {
      let at = 0;
      let k = 0;
      while (at < down) {
        at += Math.min(1_000 * 2 ** k, 32_000) * 1.2;
        k++;
      }
      expect(at - down).toBeLessThanOrEqual(rejoinWindowMs(0, down));
    }
  });
});
