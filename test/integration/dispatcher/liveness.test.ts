import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { uniqueName } from '@reach/sdk/testing';
import { createRedis, type Redis } from '@reach/store';
import { FORGET_AFTER_MS, DispatcherLiveness } from '../../../services/dispatcher/src/liveness.js';
import { stack } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';

// Dispatcher instances stamp themselves alive in one Redis hash; a starting instance learns
// from it how long a killed one's agents may have had no socket (and so how long to wait
// before sweeping their ack deadlines). Against the real Redis, on a key of this test's own.
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
    expect(Math.abs(Date.now() - Number(await redis.hget(key, 'disp-a')))).toBeLessThan(1_000);
    await live.stop();
    expect(await redis.hget(key, 'disp-a')).toBeNull();
  });

  it('a starting instance reads how long ago the others were last alive, and keeps their entries', async () => {
    await redis.del(key);
    const starting = new DispatcherLiveness(redis, 'disp-b', silentLogger, key);
    expect(await starting.sinceLastAlive()).toBeUndefined();
    const now = Date.now();
    // Killed first, then a crash loop's restart that listened before it was killed too; and an
    // old entry of this instance's own name, which is not counted.
    await redis.hset(key, 'killed-first', now - 12_000, 'crash-looped', now - 4_000, 'disp-b', now - 50);
    expect(await starting.sinceLastAlive(now)).toBe(4_000);
    // Read, not consumed: a successor that crash-loops too sees the same.
    expect(await new DispatcherLiveness(redis, 'disp-c', silentLogger, key).sinceLastAlive(now)).toBe(50);
    expect(Object.keys(await redis.hgetall(key)).sort()).toEqual(['crash-looped', 'disp-b', 'killed-first']);
  });

  it('a running instance forgets those dead for longer than FORGET_AFTER_MS, and only those', async () => {
    await redis.del(key);
    const now = Date.now();
    await redis.hset(key, 'long-dead', now - FORGET_AFTER_MS - 1_000, 'recently-killed', now - 5_000);
    const live = new DispatcherLiveness(redis, 'disp-d', silentLogger, key);
    live.start();
    try {
      await eventually('forgotten', async () => (await redis.hget(key, 'long-dead')) === null);
      expect(Object.keys(await redis.hgetall(key)).sort()).toEqual(['disp-d', 'recently-killed']);
    } finally {
      await live.stop();
    }
  });
});
