import { describe, expect, it } from 'vitest';
import { completeUntil, covers, ReadModelWatermark, type OffsetReader } from '../../../services/retry-scheduler/dist/read-model-watermark.js';

const offsets = (o: Record<string, number>) => new Map(Object.entries(o).map(([k, v]) => [k, BigInt(v)]));

describe('read-model watermark (the stuck sweep judges only what the tracker has written)', () => {
  it('a snapshot is covered when the committed offsets reach its end offsets on every partition with records', () => {
    expect(covers(offsets({ 's:0': 10, 's:1': 5 }), offsets({ 's:0': 10, 's:1': 5 }))).toBe(true);
    expect(covers(offsets({ 's:0': 11, 's:1': 5 }), offsets({ 's:0': 10, 's:1': 5 }))).toBe(true);
    expect(covers(offsets({ 's:0': 9, 's:1': 5 }), offsets({ 's:0': 10, 's:1': 5 }))).toBe(false);
    // A partition never committed: covered only while it is empty.
    expect(covers(offsets({ 's:0': 10 }), offsets({ 's:0': 10, 's:1': 0 }))).toBe(true);
    expect(covers(offsets({ 's:0': 10 }), offsets({ 's:0': 10, 's:1': 1 }))).toBe(false);
  });

  it('the read model is complete up to the latest covered snapshot; none covered is -Infinity', () => {
    const snaps = [
      { at: 1_000, ends: offsets({ 's:0': 10 }) },
      { at: 2_000, ends: offsets({ 's:0': 20 }) },
      { at: 3_000, ends: offsets({ 's:0': 30 }) },
    ];
    expect(completeUntil(snaps, offsets({ 's:0': 25 }))).toBe(2_000);
    expect(completeUntil(snaps, offsets({ 's:0': 30 }))).toBe(3_000);
    expect(completeUntil(snaps, offsets({ 's:0': 5 }))).toBe(Number.NEGATIVE_INFINITY);
  });

  it('follows a tracker that stops and catches up, and forgets snapshots older than it keeps', async () => {
    let end = 0;
    let committed = 0;
    const reader: OffsetReader = {
      ends: () => Promise.resolve(offsets({ 's:0': end })),
      committed: () => Promise.resolve(offsets({ 's:0': committed })),
    };
    const w = new ReadModelWatermark(reader, 10_000);
    end = 100;
    committed = 100;
    expect(await w.observe(0)).toBe(0); // caught up right now
    end = 200; // traffic goes on; the tracker is killed and commits nothing
    expect(await w.observe(5_000)).toBe(0);
    end = 300;
    expect(await w.observe(10_000)).toBe(0);
    committed = 200; // restarted, it catches up to what existed at 5 s
    end = 400;
    expect(await w.observe(15_000)).toBe(5_000);
    committed = 400;
    expect(await w.observe(20_000)).toBe(20_000);
    // Snapshots older than 10 s are gone: a tracker stalled behind all of them holds the sweep.
    committed = 350;
    end = 500;
    expect(await w.observe(40_000)).toBe(Number.NEGATIVE_INFINITY);
  });

  it('cannot answer while Kafka cannot be asked: the error reaches the sweep, which skips its round', async () => {
    const w = new ReadModelWatermark({ ends: () => Promise.reject(new Error('broker down')), committed: () => Promise.resolve(new Map()) }, 10_000);
    await expect(w.observe(0)).rejects.toThrow('broker down');
  });
});
