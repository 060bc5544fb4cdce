import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { uniqueName } from '@reach/sdk/testing';
import { createRedis, type Redis } from '@reach/store';
import { DEAD_AFTER_MS, DispatcherLiveness } from '../../../services/dispatcher/src/liveness.js';
import { stack } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';

// Dispatcher instances stamp themselves alive in one Redis hash; a starting instance learns
// from it how long a dead one's agents have had no socket (and so how long to wait before
// sweeping their ack deadlines). Against the real Redis, on a key of this test's own.
let redis: Redis;
const key = `reach:test:${uniqueName('liveness')}`;

beforeAll(() => {
  redis = createRedis(stack.redisUrl, silentLogger);
});
afterAll(async () => {
  await redis.del(key);
  redis.disconnect();
});

describe('dispatcher liveness', () => {
  it('a running instance stamps itself; a polite stop removes it', async () => {
    const live = new DispatcherLiveness(redis, 'disp-a', silentLogger, key);
    live.start();
    await eventually('stamped', async () => (await redis.hget(key, 'disp-a')) !== null);
    const at = Number(await redis.hget(key, 'disp-a'));
    expect(Math.abs(Date.now() - at)).toBeLessThan(DEAD_AFTER_MS);
    await live.stop();
    expect(await redis.hget(key, 'disp-a')).toBeNull();
  });

  it('a starting instance reads how long the longest-dead one is gone, and forgets the dead', async () => {
    const now = Date.now();
    await redis.hset(key, 'dead-old', now - 12_000, 'dead-new', now - 5_000, 'alive', now - 500);
    const starting = new DispatcherLiveness(redis, 'disp-b', silentLogger, key);
    const down = await starting.lastDeath(now);
    expect(down).toBe(12_000);
    expect(Object.keys(await redis.hgetall(key)).sort()).toEqual(['alive']);
    // Counted once: the next start sees no dead instance.
    expect(await starting.lastDeath(now)).toBeUndefined();
  });
});
