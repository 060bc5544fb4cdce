import { describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { DueDrivenJob, PeriodicJob, WakeAlarm } from '@reach/service-kit';

describe('PeriodicJob', () => {
  it('runs repeatedly, never overlaps itself, survives a failing run, and stop() waits for the run in progress', async () => {
    let active = 0;
    let maxActive = 0;
    let runs = 0;
    let finished = 0;
    const job = new PeriodicJob(
      'test job',
      5,
      async () => {
        runs++;
        active++;
        maxActive = Math.max(maxActive, active);
        await new Promise((r) => setTimeout(r, 15)); // longer than the interval
        active--;
        finished++;
        if (runs === 2) throw new Error('a failing run');
      },
      silentLogger,
    );
    job.start();
    while (runs < 4) await new Promise((r) => setTimeout(r, 5));
    await job.stop();
    expect(maxActive).toBe(1);
    expect(finished).toBe(runs); // the run in progress at stop() completed
    const after = runs;
    await new Promise((r) => setTimeout(r, 40));
    expect(runs).toBe(after); // and nothing runs after stop()
  });
});

describe('DueDrivenJob', () => {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  /** Polls until `cond` holds; false if it did not within `ms`. */
  async function until(cond: () => boolean, ms: number): Promise<boolean> {
    const end = Date.now() + ms;
    while (!cond()) {
      if (Date.now() > end) return false;
      await sleep(5);
    }
    return true;
  }

  it('sleeps until the next due time its run reports, within its gaps, and wakeAt brings a run forward', async () => {
    let runs = 0;
    let due: number | undefined;
    const job = new DueDrivenJob(
      'test sweep',
      { minGapMs: 20, maxGapMs: 3_000 },
      async () => {
        runs++;
        const next = due;
        due = undefined; // reported once: the run at that time settles it
        return next;
      },
      silentLogger,
    );
    job.start();
    expect(await until(() => runs === 1, 2_000)).toBe(true);
    // nothing due: no run at every minGap, the next only after maxGap
    await sleep(200);
    expect(runs).toBe(1);
    // something written due in 30 ms: the job runs for it well before maxGap
    job.wakeAt(Date.now() + 30);
    expect(await until(() => runs === 2, 2_000)).toBe(true);
    // a run that reports a due time 40 ms ahead runs again then, not after maxGap
    due = Date.now() + 40;
    job.wakeAt(Date.now());
    expect(await until(() => runs === 4, 2_000)).toBe(true);
    await job.stop();
    job.wakeAt(Date.now());
    await sleep(60);
    expect(runs).toBe(4);
  });

  it('never runs twice at once nor within minGap, a wake asked for during a run comes after it, and a failed run is tried again after minGap', async () => {
    const starts: number[] = [];
    let active = 0;
    let maxActive = 0;
    let fail = true;
    const job = new DueDrivenJob(
      'test sweep',
      { minGapMs: 30, maxGapMs: 10_000 },
      async () => {
        starts.push(Date.now());
        active++;
        maxActive = Math.max(maxActive, active);
        job.wakeAt(Date.now()); // due at once, asked for while running
        await sleep(10);
        active--;
        if (fail) {
          fail = false;
          throw new Error('a failing run');
        }
        return undefined;
      },
      silentLogger,
    );
    job.start();
    // the failed first run and the wakes asked for during each run keep it going; maxGap would not
    expect(await until(() => starts.length >= 4, 3_000)).toBe(true);
    await job.stop();
    expect(maxActive).toBe(1);
    for (let i = 1; i < starts.length; i++) expect(starts[i]! - starts[i - 1]!).toBeGreaterThanOrEqual(30 + 10 - 2);
  });
});

describe('WakeAlarm', () => {
  it('passes each ring to the listener that answers it, and drops rings before that', () => {
    const alarm = new WakeAlarm();
    const heard: number[] = [];
    alarm.ring(1);
    alarm.answer((at) => heard.push(at));
    alarm.ring(2);
    alarm.ring(3);
    expect(heard).toEqual([2, 3]);
  });
});
