import { afterEach, describe, expect, it, vi } from 'vitest';
import { BUSY_HEARTBEAT_MAX_MS, HEARTBEAT_INTERVAL_MS, keepBeating } from '@reach/kafka';

// kafkajs heartbeats only between chunks of a batch: a chunk slower than the session got its
// member evicted, and a tracker catching up after a kill was evicted again and again (chaos).
// keepBeating heartbeats while the chunk is in hand, for a bounded time.
afterEach(() => {
  vi.useRealTimers();
});

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

describe('keepBeating', () => {
  it('heartbeats every interval while the work runs, and stops when it settles', async () => {
    vi.useFakeTimers();
    let beats = 0;
    const work = deferred<string>();
    const result = keepBeating(async () => void beats++, work.promise);
    await vi.advanceTimersByTimeAsync(HEARTBEAT_INTERVAL_MS * 10 + 10);
    expect(beats).toBe(10);
    work.resolve('done');
    await expect(result).resolves.toBe('done');
    await vi.advanceTimersByTimeAsync(HEARTBEAT_INTERVAL_MS * 5);
    expect(beats).toBe(10);
  });

  it('passes the work’s failure on and stops beating', async () => {
    vi.useFakeTimers();
    let beats = 0;
    const work = deferred<void>();
    const result = keepBeating(async () => void beats++, work.promise);
    const failed = expect(result).rejects.toThrow('write failed');
    await vi.advanceTimersByTimeAsync(HEARTBEAT_INTERVAL_MS * 2 + 10);
    work.reject(new Error('write failed'));
    await failed;
    await vi.advanceTimersByTimeAsync(HEARTBEAT_INTERVAL_MS * 5);
    expect(beats).toBe(2);
  });

  it('ignores a failed heartbeat (a rebalance: the loop rejoins) and keeps going', async () => {
    vi.useFakeTimers();
    let calls = 0;
    const work = deferred<void>();
    const result = keepBeating(async () => {
      calls++;
      throw new Error('The group is rebalancing');
    }, work.promise);
    await vi.advanceTimersByTimeAsync(HEARTBEAT_INTERVAL_MS * 3 + 10);
    expect(calls).toBe(3);
    work.resolve();
    await expect(result).resolves.toBeUndefined();
  });

  it('stops beating after the cap, so a wedged handler does not hold its partitions', async () => {
    vi.useFakeTimers();
    let beats = 0;
    const work = deferred<void>();
    void keepBeating(async () => void beats++, work.promise);
    await vi.advanceTimersByTimeAsync(BUSY_HEARTBEAT_MAX_MS + HEARTBEAT_INTERVAL_MS * 10);
    expect(beats).toBe(BUSY_HEARTBEAT_MAX_MS / HEARTBEAT_INTERVAL_MS - 1);
    work.resolve();
  });
});
