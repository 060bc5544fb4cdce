import { describe, expect, it } from 'vitest';
import { BatchedCall, GroupCommit } from '@reach/kafka';

/** A write the test finishes by hand, recording what each call was given. */
function manualWriter() {
  const calls: Array<{ items: number[]; finish: (err?: Error) => void }> = [];
  const write = (items: number[]) =>
    new Promise<void>((resolve, reject) => calls.push({ items: [...items], finish: (err) => (err ? reject(err) : resolve()) }));
  return { calls, write };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('GroupCommit', () => {
  it('writes what is added in one tick together, and what comes during a write in the next one', async () => {
    const w = manualWriter();
    const gc = new GroupCommit<number>(w.write);
    const a = gc.add([1, 2]);
    const b = gc.add([3]);
    await tick();
    expect(w.calls.map((c) => c.items)).toEqual([[1, 2, 3]]);
    const c = gc.add([4]);
    const d = gc.add([5, 6]);
    await tick();
    expect(w.calls).toHaveLength(1); // one write at a time
    let settled = false;
    void c.then(() => (settled = true));
    w.calls[0]!.finish();
    await Promise.all([a, b]);
    await tick();
    expect(w.calls.map((x) => x.items)).toEqual([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(settled).toBe(false); // c waits for the write that took its items
    w.calls[1]!.finish();
    await Promise.all([c, d]);
    expect(settled).toBe(true);
  });

  it('rejects every caller of a failed write, and the next group is written regardless', async () => {
    const w = manualWriter();
    const gc = new GroupCommit<number>(w.write);
    const a = gc.add([1]);
    const b = gc.add([2]);
    await tick();
    const c = gc.add([3]);
    w.calls[0]!.finish(new Error('connection lost'));
    await expect(a).rejects.toThrow('connection lost');
    await expect(b).rejects.toThrow('connection lost');
    await tick();
    expect(w.calls[1]!.items).toEqual([3]);
    w.calls[1]!.finish();
    await expect(c).resolves.toBeUndefined();
  });
});

describe('BatchedCall', () => {
  it('runs the calls of one macrotask together and gives each caller its own answer', async () => {
    const runs: number[][] = [];
    const batched = new BatchedCall<number, string>(async (items) => {
      runs.push(items);
      return items.map((i) => `#${i}`);
    });
    const first = await Promise.all([batched.add(1), batched.add(2), batched.add(3)]);
    expect(first).toEqual(['#1', '#2', '#3']);
    expect(await batched.add(4)).toBe('#4');
    expect(runs).toEqual([[1, 2, 3], [4]]);
  });

  it('starts the next run while the last is still answering (runs do not wait for each other)', async () => {
    const finish: Array<() => void> = [];
    const runs: number[][] = [];
    const batched = new BatchedCall<number, number>(
      (items) =>
        new Promise((resolve) => {
          runs.push(items);
          finish.push(() => resolve(items));
        }),
    );
    const first = batched.add(1);
    await tick();
    const second = batched.add(2);
    await tick();
    expect(runs).toEqual([[1], [2]]);
    finish[1]!();
    expect(await second).toBe(2);
    finish[0]!();
    expect(await first).toBe(1);
  });

  it('fails every caller of a run that fails, and the next run goes on', async () => {
    let fail = true;
    const batched = new BatchedCall<number, number>(async (items) => {
      if (fail) throw new Error('redis away');
      return items;
    });
    const failed = await Promise.allSettled([batched.add(1), batched.add(2)]);
    expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    fail = false;
    expect(await batched.add(3)).toBe(3);
  });
});
