import { describe, expect, it } from 'vitest';
import { partitionLag, STAGES, stageRow, type StageSample } from '../../../services/console/dist/lag.js';

const spec = STAGES.find((s) => s.stage === 'pending')!;
const sample = (at: number, parts: Array<[low: number, high: number, committed: number]>, groupState = 'Stable', members = 1): StageSample => ({
  at,
  partitions: parts.map(([low, high, committed], partition) => ({ partition, low, high, committed })),
  groupState,
  members,
});

describe('console lag per stage', () => {
  it('names every stage topic with the consume loop group that drains it', () => {
    expect(STAGES.map((s) => [s.stage, s.topic, s.group])).toEqual([
      ['ingress', 'reach.ingress.v1', 'reach-ingress'],
      ['pending', 'reach.pending.v1', 'reach-router'],
      ['routed', 'reach.routed.v1', 'reach-dispatcher'],
      ['retry', 'reach.retry.v1', 'reach-retry-scheduler'],
      ['dlq', 'reach.dlq.v1', 'reach-dead-letter'],
      ['status', 'reach.status-batches.v1', 'reach-tracker'],
    ]);
  });

  it('is end offset minus committed offset, per partition and summed', () => {
    const row = stageRow(
      spec,
      sample(1000, [
        [0, 100, 90],
        [0, 50, 50],
        [0, 7, 0],
      ]),
    );
    expect(row.lag).toBe(17);
    expect(row.max_partition_lag).toBe(10);
    expect(row.end_offset).toBe(157);
    expect(row.committed_offset).toBe(140);
    expect(row.produced_per_s).toBeNull();
  });

  it('counts a partition the group never committed from its log start, and never goes negative', () => {
    expect(partitionLag({ partition: 0, low: 40, high: 100, committed: -1 })).toBe(60);
    // retention deleted records the group had not read: it cannot read them any more
    expect(partitionLag({ partition: 0, low: 40, high: 100, committed: 10 })).toBe(60);
    // a committed offset past the end (topic recreated) is no negative lag
    expect(partitionLag({ partition: 0, low: 0, high: 5, committed: 9 })).toBe(0);
  });

  it('gives produce and consume rates from the previous sample', () => {
    const prev = sample(1000, [
      [0, 100, 100],
      [0, 100, 80],
    ]);
    const cur = sample(3000, [
      [0, 300, 250],
      [0, 120, 120],
    ]);
    const row = stageRow(spec, cur, prev);
    expect(row.produced_per_s).toBe((420 - 200) / 2);
    expect(row.consumed_per_s).toBe((370 - 180) / 2);
  });

  it('has no rate when offsets went backwards or the partition count changed', () => {
    expect(stageRow(spec, sample(2000, [[0, 10, 10]]), sample(1000, [[0, 500, 500]])).produced_per_s).toBeNull();
    expect(
      stageRow(
        spec,
        sample(2000, [
          [0, 10, 10],
          [0, 1, 1],
        ]),
        sample(1000, [[0, 5, 5]]),
      ).produced_per_s,
    ).toBeNull();
  });

  it('passes the group state and members through', () => {
    const row = stageRow(spec, sample(1, [], 'Empty', 0));
    expect([row.group_state, row.members, row.lag, row.max_partition_lag]).toEqual(['Empty', 0, 0, 0]);
  });
});
