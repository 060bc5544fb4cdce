import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../packages/core/dist/index.js';
import { createRedis, type Redis } from '../../../packages/store/dist/index.js';
import { bucketKey, QuotaBuckets } from '../../../services/ingress/dist/quota-buckets.js';
import { countingCalls } from '../../helpers/counting.js';
import { stack, uniq } from '../../helpers/env.js';

// The shared token buckets of ingress (R-D7) on the real Redis: one Lua script per
// decision, so clients racing on one producer never over-admit; and the per-instance fallback
// when Redis is unavailable (a client on a port where nothing listens, or disconnected).
const fast = { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeoutMs: 300 } as const;
let redisA: Redis;
let redisB: Redis;
let deadRedis: Redis;

beforeAll(() => {
  redisA = createRedis(stack.redisUrl, silentLogger, fast);
  redisB = createRedis(stack.redisUrl, silentLogger, fast);
  deadRedis = createRedis('redis://127.0.0.1:1/0', silentLogger, { ...fast, lazyConnect: true });
});

afterAll(async () => {
  deadRedis?.disconnect();
  await Promise.all([redisA?.quit(), redisB?.quit()]);
});

async function ready(r: Redis): Promise<void> {
  if (r.status !== 'ready') await new Promise((resolve) => r.once('ready', resolve));
}

describe('QuotaBuckets on Redis', () => {
  it('two instances racing on one producer admit exactly the burst (plus what the rate refilled meanwhile)', async () => {
    await Promise.all([ready(redisA), ready(redisB)]);
    const a = new QuotaBuckets(redisA, silentLogger);
    const b = new QuotaBuckets(redisB, silentLogger);
    const producer = uniq('it.bucket.race');
    const limit = { ratePerS: 1, burst: 50 };
    const started = Date.now();
    const decisions = await Promise.all(Array.from({ length: 400 }, (_, i) => (i % 2 ? a : b).take(producer, limit)));
    const elapsedS = (Date.now() - started) / 1000;
    const allowed = decisions.filter((d) => d.allowed).length;
    expect(decisions.every((d) => !d.local)).toBe(true);
    expect(allowed).toBeGreaterThanOrEqual(50);
    expect(allowed).toBeLessThanOrEqual(50 + Math.ceil(elapsedS * limit.ratePerS));
    // A refused decision says when a token is back: at most 1 s at 1 msg/s.
    const refused = decisions.find((d) => !d.allowed)!;
    expect(refused.waitMs).toBeGreaterThan(0);
    expect(refused.waitMs).toBeLessThanOrEqual(1000);
  });

  it('decisions asked for one producer in the same tick share one script, admitted in the order asked', async () => {
    await ready(redisA);
    const counting = countingCalls(redisA, ['evalsha', 'eval']);
    const buckets = new QuotaBuckets(counting.proxy, silentLogger);
    const producer = uniq('it.bucket.batch');
    const other = uniq('it.bucket.batch-other');
    const limit = { ratePerS: 1, burst: 10 };
    const decisions = await Promise.all([
      ...Array.from({ length: 25 }, () => buckets.take(producer, limit)),
      ...Array.from({ length: 3 }, () => buckets.take(other, limit)),
    ]);
    // One script per producer (a first call on a fresh server may be sent again as EVAL).
    expect(counting.calls()).toBeGreaterThanOrEqual(2);
    expect(counting.calls()).toBeLessThanOrEqual(4);
    const mine = decisions.slice(0, 25);
    expect(mine.map((d) => d.allowed)).toEqual([...Array<boolean>(10).fill(true), ...Array<boolean>(15).fill(false)]);
    expect(mine.every((d) => !d.local)).toBe(true);
    expect(mine[24]!.waitMs).toBeGreaterThan(0);
    expect(mine[24]!.waitMs).toBeLessThanOrEqual(1000);
    expect(decisions.slice(25).every((d) => d.allowed)).toBe(true);
    // The bucket holds what ten single takes would have left: no token, or a fraction refilled.
    expect(Number((await redisA.hgetall(bucketKey(producer))).tokens)).toBeLessThan(1);
  });

  it('a Kafka backlog is judged at the times it was produced, not the time it is caught up with', async () => {
    await ready(redisA);
    const buckets = new QuotaBuckets(redisA, silentLogger);
    const limit = { ratePerS: 10, burst: 5 };
    const start = Date.now() - 5_000;
    // 30 messages produced at 10/s (within the quota), consumed at once after an outage: all admitted.
    const compliant = uniq('it.bucket.backlog');
    const kept = await Promise.all(Array.from({ length: 30 }, (_, i) => buckets.take(compliant, limit, 1, start + i * 100)));
    expect(kept.filter((d) => d.allowed)).toHaveLength(30);
    // The same 30 without their times are decided now: only the burst.
    const untimed = uniq('it.bucket.untimed');
    const now = await Promise.all(Array.from({ length: 30 }, () => buckets.take(untimed, limit)));
    expect(now.filter((d) => d.allowed)).toHaveLength(5);
    // Produced at 20/s for 1.5 s: the burst and what 10/s refilled are admitted, in time order, the rest refused.
    const fast = uniq('it.bucket.fast');
    const over = await Promise.all(Array.from({ length: 30 }, (_, i) => buckets.take(fast, limit, 1, start + i * 50)));
    const admitted = over.filter((d) => d.allowed).length;
    expect(admitted).toBeGreaterThanOrEqual(5 + 14);
    expect(admitted).toBeLessThanOrEqual(5 + 15);
    expect(over.slice(0, 5).every((d) => d.allowed)).toBe(true);
    // A time in the future is taken as now: no tokens claimed ahead of the clock.
    const future = uniq('it.bucket.future');
    const ahead = await Promise.all(Array.from({ length: 30 }, (_, i) => buckets.take(future, limit, 1, Date.now() + 60_000 + i * 1000)));
    expect(ahead.filter((d) => d.allowed).length).toBeLessThanOrEqual(6);
  });

  it('keeps one hash-tagged key per producer that expires once the bucket would be full again', async () => {
    const buckets = new QuotaBuckets(redisA, silentLogger);
    const producer = uniq('it.bucket.key');
    expect(bucketKey(producer)).toBe(`reach:quota:{${producer}}:bucket`);
    for (let i = 0; i < 5; i++) await buckets.take(producer, { ratePerS: 10, burst: 10 });
    const state = await redisA.hgetall(bucketKey(producer));
    expect(Number(state.tokens)).toBeGreaterThanOrEqual(5);
    expect(Number(state.tokens)).toBeLessThan(6);
    const ttl = await redisA.pttl(bucketKey(producer));
    // (10 − ~5 tokens) at 10/s ≈ 500 ms, plus a second of slack
    expect(ttl).toBeGreaterThan(1000);
    expect(ttl).toBeLessThanOrEqual(1500);
  });

  it('gives a token back, never above the burst', async () => {
    const buckets = new QuotaBuckets(redisA, silentLogger);
    const producer = uniq('it.bucket.refund');
    const limit = { ratePerS: 0.01, burst: 2 };
    expect((await buckets.take(producer, limit)).allowed).toBe(true);
    expect((await buckets.take(producer, limit)).allowed).toBe(true);
    expect((await buckets.take(producer, limit)).allowed).toBe(false);
    await buckets.take(producer, limit, -1);
    expect((await buckets.take(producer, limit)).allowed).toBe(true);
    await Promise.all([1, 2, 3, 4].map(() => buckets.take(producer, limit, -1)));
    expect(Number(await redisA.hget(bucketKey(producer), 'tokens'))).toBeLessThanOrEqual(2);
  });
});

describe('QuotaBuckets without Redis', () => {
  it('decides locally, still enforcing the quota per instance, and reports the degradation once', async () => {
    const events: string[] = [];
    const buckets = new QuotaBuckets(deadRedis, silentLogger, {
      degraded: (on) => events.push(on ? 'degraded' : 'restored'),
      localDecision: () => events.push('local'),
    });
    const producer = uniq('it.bucket.dead');
    const decisions = [];
    for (let i = 0; i < 4; i++) decisions.push(await buckets.take(producer, { ratePerS: 0.01, burst: 3 }));
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false]);
    expect(decisions.every((d) => d.local)).toBe(true);
    expect(buckets.degraded).toBe(true);
    expect(events).toEqual(['degraded', 'local', 'local', 'local', 'local']);
  });

  it('goes back to the shared bucket once Redis answers again', async () => {
    const client = createRedis(stack.redisUrl, silentLogger, fast);
    await ready(client);
    const events: string[] = [];
    const buckets = new QuotaBuckets(client, silentLogger, { degraded: (on) => events.push(on ? 'degraded' : 'restored'), localDecision: () => undefined });
    const producer = uniq('it.bucket.back');
    const limit = { ratePerS: 100, burst: 100 };
    try {
      expect(await buckets.take(producer, limit)).toMatchObject({ allowed: true, local: false });
      const ended = new Promise((resolve) => client.once('end', resolve));
      client.disconnect();
      expect(await buckets.take(producer, limit)).toMatchObject({ allowed: true, local: true });
      await ended;
      await client.connect();
      // Decisions stay local until the probe interval (1 s) has passed, then one probe succeeds.
      let last = await buckets.take(producer, limit);
      const deadline = Date.now() + 10_000;
      while (last.local && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        last = await buckets.take(producer, limit);
      }
      expect(last.local).toBe(false);
      expect(buckets.degraded).toBe(false);
      expect(events).toEqual(['degraded', 'restored']);
    } finally {
      client.disconnect();
    }
  });
});
