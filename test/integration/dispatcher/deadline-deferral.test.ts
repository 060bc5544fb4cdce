import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { createRedis, type Redis } from '@reach/store';
import { stack, uniq } from '../../helpers/env.js';
import { ReplayBuffer, keys } from '../../../services/dispatcher/dist/replay-buffer.js';

// After an outage the deadline sweeper defers the ack deadlines due soon, counted from Redis's
// own clock when the script runs (a call queued while Redis was away must not defer to a moment
// already past). On the real Redis, with members of an agent no dispatcher knows.
let redis: Redis;
let buffer: ReplayBuffer;

beforeAll(() => {
  redis = createRedis(stack.redisUrl, silentLogger);
  buffer = new ReplayBuffer(redis, 60);
});
afterAll(() => redis?.disconnect());

describe('ack deadlines deferred after an outage', () => {
  it('moves the deadlines due within the window to Redis now + the window, and leaves later ones', async () => {
    const agent = uniq('it.defer');
    const soon = `${agent}|1`;
    const later = `${agent}|2`;
    const [secs, micros] = await redis.time();
    const redisNow = Number(secs) * 1000 + Math.floor(Number(micros) / 1000);
    await redis.zadd(keys.deadlines, redisNow + 300, soon, redisNow + 3_600_000, later);
    try {
      const { moved, until } = await buffer.deferDeadlinesFor(2_000);
      expect(moved).toBeGreaterThanOrEqual(1);
      expect(until).toBeGreaterThanOrEqual(redisNow + 2_000);
      expect(Number(await redis.zscore(keys.deadlines, soon))).toBe(until);
      expect(Number(await redis.zscore(keys.deadlines, later))).toBe(redisNow + 3_600_000);
    } finally {
      await redis.zrem(keys.deadlines, soon, later);
    }
  });
});
