import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Consumer } from 'kafkajs';
import { silentLogger } from '@reach/core';
import { COMMIT_STUCK_MS, OffsetCommitter } from '@reach/kafka';

// A consume loop whose done records cannot be committed for COMMIT_STUCK_MS is wedged (a
// consumer kafkajs left behind a broker restart: every commit "the coordinator is not aware of
// this member", the tracker's offsets frozen for 15 minutes in the long chaos run): the
// committer says so once, and the process exits for a supervised restart. Commits that fail
// for a while and then go through (a broker restart, a rebalance) are not that.
function fakeConsumer(commit: () => Promise<void>): Consumer {
  return { on: () => () => undefined, events: { GROUP_JOIN: 'group_join' }, commitOffsets: commit } as unknown as Consumer;
}

afterEach(() => {
  vi.useRealTimers();
});

describe('OffsetCommitter', () => {
  it('reports a consumer whose commits keep failing, once', async () => {
    vi.useFakeTimers();
    const stuck: Error[] = [];
    const committer = new OffsetCommitter(
      fakeConsumer(async () => {
        throw new Error('The coordinator is not aware of this member');
      }),
      silentLogger,
      1000,
      (err) => stuck.push(err),
    );
    await committer.done('t', 0, '41');
    await vi.advanceTimersByTimeAsync(COMMIT_STUCK_MS - 2000);
    expect(stuck).toEqual([]);
    await vi.advanceTimersByTimeAsync(3000);
    expect(stuck.map((e) => e.message)).toEqual(['The coordinator is not aware of this member']);
    await vi.advanceTimersByTimeAsync(COMMIT_STUCK_MS * 2);
    expect(stuck).toHaveLength(1);
  });

  it('does not report commits that failed for a while and then went through', async () => {
    vi.useFakeTimers();
    let failing = true;
    const committed: unknown[] = [];
    const stuck: Error[] = [];
    const committer = new OffsetCommitter(
      fakeConsumer(async () => {
        if (failing) throw new Error('The coordinator is loading');
        committed.push('ok');
      }),
      silentLogger,
      1000,
      (err) => stuck.push(err),
    );
    await committer.done('t', 0, '1');
    await vi.advanceTimersByTimeAsync(COMMIT_STUCK_MS - 5000);
    failing = false;
    await vi.advanceTimersByTimeAsync(1000);
    expect(committed).toHaveLength(1);
    failing = true;
    await committer.done('t', 0, '2');
    await vi.advanceTimersByTimeAsync(COMMIT_STUCK_MS - 5000);
    expect(stuck).toEqual([]);
  });

  it('never reports while there is nothing to commit', async () => {
    vi.useFakeTimers();
    const stuck: Error[] = [];
    new OffsetCommitter(
      fakeConsumer(async () => {
        throw new Error('never asked');
      }),
      silentLogger,
      1000,
      (err) => stuck.push(err),
    );
    await vi.advanceTimersByTimeAsync(COMMIT_STUCK_MS * 3);
    expect(stuck).toEqual([]);
  });
});
