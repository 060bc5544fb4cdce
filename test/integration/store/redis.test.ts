import { describe, expect, it } from 'vitest';
import { createRedis } from '../../../packages/store/dist/index.js';
import { stack, uniq } from '../../helpers/env.js';
import { recordingLogger } from '../../helpers/recording-logger.js';

describe('createRedis', () => {
  it('connects to the real Redis, sets and gets, and quits cleanly', async () => {
    const { logger, lines } = recordingLogger();
    const redis = createRedis(stack.redisUrl, logger, { connectionName: 'reach-store-test' });
    const key = uniq('reach:test:store');
    const ended = new Promise<void>((resolve) => redis.once('end', () => resolve()));
    try {
      expect(await redis.set(key, 'value-1', 'EX', 60)).toBe('OK');
      expect(await redis.get(key)).toBe('value-1');
      expect(await redis.ttl(key)).toBeGreaterThan(0);
      expect(await redis.del(key)).toBe(1);
    } finally {
      expect(await redis.quit()).toBe('OK');
    }
    await ended;
    expect(redis.status).toBe('end');
    expect(lines.some((l) => l.msg === 'redis: ready')).toBe(true);
    expect(lines.filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([]);
  });

  it('fails commands fast when Redis is unreachable and offline queueing is off, logging instead of crashing', async () => {
    const { logger, lines } = recordingLogger();
    // port 1 on loopback: nothing listens, the connection is refused at once
    const redis = createRedis('redis://127.0.0.1:1/0', logger, {
      enableOfflineQueue: false,
      maxReconnectDelayMs: 200,
    });
    try {
      await expect(redis.get('anything')).rejects.toThrow();
      await new Promise((r) => setTimeout(r, 500));
      // one warn for the outage, repeats only at debug
      expect(lines.filter((l) => l.level === 'warn')).toHaveLength(1);
      expect(lines.some((l) => l.msg.startsWith('redis: connection error'))).toBe(true);
    } finally {
      redis.disconnect();
    }
  });
});
