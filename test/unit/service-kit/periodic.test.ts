import { describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { PeriodicJob } from '@reach/service-kit';

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
