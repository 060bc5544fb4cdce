import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '@reach/core';
import { ServiceMetrics } from '../../../packages/service-kit/dist/index.js';
import { DeadLetterMetrics } from '../../../services/dead-letter/dist/metrics.js';
import type { DeadLetterStore } from '../../../services/dead-letter/dist/store.js';
import { Sweeper, SWEEP_INTERVAL_MS, SWEEP_RETRY_MS } from '../../../services/dead-letter/dist/sweeper.js';

// When the sweep runs: at start, every minute, and soon again after a failure (a PostgreSQL
// hiccup at start must not leave stale entries for a whole minute more).

/** A store whose sweeps fail while `failing` is set; counts the stale sweeps it was asked for. */
function fakeStore() {
  const state = { failing: false, staleSweeps: 0 };
  const store = {
    expireParked: async () => {
      if (state.failing) throw new Error('connection refused');
      return [];
    },
    sweepStale: async () => {
      state.staleSweeps++;
      return [];
    },
  } as unknown as DeadLetterStore;
  return { store, state };
}

describe('the dead-letter sweep schedule', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('sweeps at start and then once a minute', async () => {
    const { store, state } = fakeStore();
    const sweeper = new Sweeper(store, 3600, new DeadLetterMetrics(new ServiceMetrics('dead-letter')), silentLogger);
    sweeper.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(state.staleSweeps).toBe(1);
    await vi.advanceTimersByTimeAsync(SWEEP_INTERVAL_MS - 1);
    expect(state.staleSweeps).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(state.staleSweeps).toBe(2);
    await sweeper.stop();
    await vi.advanceTimersByTimeAsync(SWEEP_INTERVAL_MS * 3);
    expect(state.staleSweeps).toBe(2);
  });

  it('retries a failed sweep after SWEEP_RETRY_MS, then goes back to the minute', async () => {
    const { store, state } = fakeStore();
    const sweeper = new Sweeper(store, 3600, new DeadLetterMetrics(new ServiceMetrics('dead-letter')), silentLogger);
    state.failing = true;
    sweeper.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(state.staleSweeps).toBe(0);
    state.failing = false;
    await vi.advanceTimersByTimeAsync(SWEEP_RETRY_MS);
    expect(state.staleSweeps).toBe(1);
    await vi.advanceTimersByTimeAsync(SWEEP_RETRY_MS);
    expect(state.staleSweeps).toBe(1);
    await vi.advanceTimersByTimeAsync(SWEEP_INTERVAL_MS - SWEEP_RETRY_MS);
    expect(state.staleSweeps).toBe(2);
    await sweeper.stop();
  });
});
