import { describe, expect, it } from 'vitest';
import { ReachError, silentLogger } from '@reach/core';
import { WakeAlarm } from '@reach/service-kit';
import { untilStored } from '../../../services/dispatcher/dist/answer-retry.js';
import { DeadlineSweeper, REJOIN_MS } from '../../../services/dispatcher/dist/deadline-sweeper.js';
import type { DeadlineSweeperDeps } from '../../../services/dispatcher/dist/deadline-sweeper.js';

// An answer the dispatcher received is tried again while Redis is away, and the deadline
// sweeper back from the outage gives such answers time to land before it fails deliveries.
const away = () => new ReachError('DEPENDENCY_UNAVAILABLE', 'redis take failed: connection closed');

describe('untilStored', () => {
  it('tries again while the store is away, and returns what it finally answers', async () => {
    let calls = 0;
    const out = await untilStored(
      'ack',
      async () => {
        if (++calls < 4) throw away();
        return 'done';
      },
      silentLogger,
    );
    expect(out).toBe('done');
    expect(calls).toBe(4);
  });

  it('does not try again an answer refused on its merits', async () => {
    let calls = 0;
    const refused = untilStored(
      'ack',
      async () => {
        calls++;
        throw new ReachError('INVALID_ENVELOPE', 'seq 3 is not message m');
      },
      silentLogger,
    );
    await expect(refused).rejects.toMatchObject({ codeName: 'INVALID_ENVELOPE' });
    expect(calls).toBe(1);
  });

  it('gives up when the store stays away longer than it waits', async () => {
    let calls = 0;
    const gone = untilStored(
      'ack',
      async () => {
        calls++;
        throw away();
      },
      silentLogger,
      250,
    );
    await expect(gone).rejects.toMatchObject({ codeName: 'DEPENDENCY_UNAVAILABLE' });
    expect(calls).toBeGreaterThan(1);
  });
});

describe('DeadlineSweeper after an outage', () => {
  function sweeperWith(redisAway: () => boolean) {
    const steps: string[] = [];
    const claims = {
      claimDue: async () => {
        if (redisAway()) throw away();
        steps.push('claim');
        return { members: [], next: undefined };
      },
      done: async () => undefined,
    };
    const deps = {
      claims,
      waitClaims: claims,
      promoted: () => undefined,
      buffer: {
        deferDeadlinesFor: async (ms: number) => {
          if (redisAway()) throw away();
          steps.push(`defer ${ms}`);
          return { moved: 0, until: 0 };
        },
      },
      failures: {},
      producer: {},
      metrics: {},
      log: silentLogger,
      intervalMs: 100,
      alarm: new WakeAlarm(),
    } as unknown as DeadlineSweeperDeps;
    return { sweeper: new DeadlineSweeper(deps), steps };
  }

  it('defers the due deadlines by REJOIN_MS before its first claim after failing sweeps', async () => {
    let down = true;
    const { sweeper, steps } = sweeperWith(() => down);
    await expect(sweeper.sweep(1_000)).rejects.toThrow();
    await expect(sweeper.sweep(1_100)).rejects.toThrow();
    down = false;
    await sweeper.sweep(5_000);
    expect(steps).toEqual([`defer ${REJOIN_MS}`, 'claim', 'claim']);
    // Once: the next sweep claims at once.
    await sweeper.sweep(5_100);
    expect(steps.slice(3)).toEqual(['claim', 'claim']);
  });

  it('never defers while every sweep works', async () => {
    const { sweeper, steps } = sweeperWith(() => false);
    await sweeper.sweep(1_000);
    await sweeper.sweep(1_100);
    expect(steps.every((s) => s === 'claim')).toBe(true);
  });
});
