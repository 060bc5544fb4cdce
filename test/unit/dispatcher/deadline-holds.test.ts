import { afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '@reach/core';
import type { RoutedDelivery } from '@reach/envelope';
import {
  DeadlineHolds,
  HOLD_EVERY_MS,
  HOLD_MAX_MS,
  MIN_SEND_BUDGET_MS,
  heldUntil,
  type HeldDelivery,
} from '../../../services/dispatcher/dist/deadline-holds.js';
import type { ReplayBuffer } from '../../../services/dispatcher/dist/replay-buffer.js';
import { pastBudget, withWindowFrom } from '../../../services/dispatcher/dist/routed-consumer.js';

// A broker restart held routed deliveries for 10–25 s between being stored and being sent: their
// ack deadlines passed first and the sweeper retried them elsewhere while the first agent ran
// them too (pnpm chaos --faults kill-kafka: up to 39 keys run twice, 36 DEAD though acked).

type Held = Array<{ agent: string; seq: number; until: number }>;

function holdsWithCalls(failing = false): { holds: DeadlineHolds; calls: Held[] } {
  const calls: Held[] = [];
  const buffer = {
    holdDeadlines: async (items: Held) => {
      if (failing) throw new Error('redis down');
      calls.push(items);
    },
  } as unknown as ReplayBuffer;
  return { holds: new DeadlineHolds(buffer, silentLogger), calls };
}

const delivery = (seq: number, budgetAt: number | null = null): HeldDelivery => ({ agent: 'a', seq, windowMs: 10_000, budgetAt });

afterEach(() => vi.useRealTimers());

describe('held ack deadlines', () => {
  it('sets a whole window from now, never past the budget', () => {
    expect(heldUntil(delivery(1), 1_000)).toBe(11_000);
    expect(heldUntil(delivery(1, 5_000), 1_000)).toBe(5_000);
  });

  it('renews every held delivery each HOLD_EVERY_MS until it ends, and none after', async () => {
    vi.useFakeTimers({ now: 0 });
    const { holds, calls } = holdsWithCalls();
    holds.begin([delivery(1), delivery(2)]);
    await vi.advanceTimersByTimeAsync(HOLD_EVERY_MS);
    expect(calls).toEqual([
      [
        { agent: 'a', seq: 1, until: HOLD_EVERY_MS + 10_000 },
        { agent: 'a', seq: 2, until: HOLD_EVERY_MS + 10_000 },
      ],
    ]);
    holds.end([delivery(1)]);
    await vi.advanceTimersByTimeAsync(HOLD_EVERY_MS);
    expect(calls[1]).toEqual([{ agent: 'a', seq: 2, until: 2 * HOLD_EVERY_MS + 10_000 }]);
    holds.end([delivery(2)]);
    await vi.advanceTimersByTimeAsync(3 * HOLD_EVERY_MS);
    expect(calls).toHaveLength(2);
    holds.stop();
  });

  it('gives a hold up after HOLD_MAX_MS or at the budget (a batch that never comes back holds nothing for ever)', async () => {
    vi.useFakeTimers({ now: 0 });
    const { holds, calls } = holdsWithCalls();
    holds.begin([delivery(1), delivery(2, 3 * HOLD_EVERY_MS)]);
    await vi.advanceTimersByTimeAsync(3 * HOLD_EVERY_MS);
    expect(calls.at(-1)!.map((c) => c.seq)).toEqual([1]);
    await vi.advanceTimersByTimeAsync(HOLD_MAX_MS);
    expect(holds.size).toBe(0);
    holds.stop();
  });

  it('survives a failing Redis: the deadline then runs as routed', async () => {
    vi.useFakeTimers({ now: 0 });
    const { holds } = holdsWithCalls(true);
    holds.begin([delivery(1)]);
    await expect(holds.renew([delivery(1)])).resolves.toBeUndefined();
    await vi.advanceTimersByTimeAsync(HOLD_EVERY_MS);
    expect(holds.size).toBe(1);
    holds.stop();
  });
});

describe('a routed delivery consumed late', () => {
  const routed = (over: Partial<RoutedDelivery>): RoutedDelivery =>
    ({ routed_at: 0, deadline_at: 10_000, budget_deadline_at: null, ...over }) as RoutedDelivery;

  it('gets its whole ack window from now, within its budget; one on time (within a second) keeps the router’s deadline', () => {
    expect(withWindowFrom(routed({}), 10_000, 15_000).deadline_at).toBe(25_000);
    expect(withWindowFrom(routed({ budget_deadline_at: 20_000 }), 10_000, 15_000).deadline_at).toBe(20_000);
    const onTime = routed({});
    expect(withWindowFrom(onTime, 10_000, 900)).toBe(onTime);
  });
});

describe('pastBudget: too late to send', () => {
  // created at 0 with a 30 s budget, unless said
  const routed = (budgetEnd: number | null, created = 0): RoutedDelivery =>
    ({ routed_at: 0, deadline_at: 10_000, budget_deadline_at: budgetEnd, envelope: { created_at: created } }) as unknown as RoutedDelivery;

  it('is not sent with less than MIN_SEND_BUDGET_MS of its budget left, whatever ack window the router left it', () => {
    expect(pastBudget(routed(30_000), 30_000 - MIN_SEND_BUDGET_MS - 1)).toBe(false);
    expect(pastBudget(routed(30_000), 30_000 - MIN_SEND_BUDGET_MS)).toBe(true);
    expect(pastBudget(routed(30_000), 29_960)).toBe(true); // sent with 40 ms left, it was acked after the sweep
  });

  it('a short budget keeps three quarters of it sendable; no budget, always', () => {
    expect(pastBudget(routed(2_000), 1_499)).toBe(false);
    expect(pastBudget(routed(2_000), 1_500)).toBe(true);
    expect(pastBudget(routed(null), Number.MAX_SAFE_INTEGER)).toBe(false);
  });
});
