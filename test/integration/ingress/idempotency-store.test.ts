import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { ReachError, silentLogger } from '../../../packages/core/dist/index.js';
import { createPgPool, createRedis, type Pool, type Redis } from '../../../packages/store/dist/index.js';
import { IdempotencyStore, idempotencyRedisKey } from '../../../services/ingress/dist/idempotency.js';
import { PgClaims } from '../../../services/ingress/dist/pg-claims.js';
import { stack, uniq } from '../../helpers/env.js';

// The idempotency store of ingress (R-D5) on the real Redis and PostgreSQL, and on
// endpoints where nothing listens (a dependency that is down), never on mocks.
let redis: Redis;
let pg: Pool;
let deadRedis: Redis;
let deadPg: Pool;

const msg = () => `msg_${ulid()}`;

/** The pool, counting the statements sent through it. */
function counting(target: Pool): { pool: Pool; statements: () => number } {
  let n = 0;
  const pool = new Proxy(target, {
    get: (t, prop, receiver) =>
      prop === 'query'
        ? (...args: unknown[]) => {
            n++;
            return (t.query as (...a: unknown[]) => unknown).apply(t, args);
          }
        : Reflect.get(t, prop, receiver),
  });
  return { pool, statements: () => n };
}

beforeAll(() => {
  redis = createRedis(stack.redisUrl, silentLogger);
  pg = createPgPool(stack.databaseUrl, { max: 2 });
  // Port 1: nothing listens; every command fails fast.
  deadRedis = createRedis('redis://127.0.0.1:1/0', silentLogger, { enableOfflineQueue: false, maxRetriesPerRequest: 0, lazyConnect: true });
  deadPg = createPgPool('postgres://postgres@127.0.0.1:1/reach', { max: 1, connectionTimeoutMs: 1000 });
});

afterAll(async () => {
  deadRedis?.disconnect();
  await Promise.all([redis?.quit(), pg?.end(), deadPg?.end()]);
});

describe('IdempotencyStore', () => {
  it('gives a key to the first message and names it to every later one', async () => {
    const store = new IdempotencyStore(redis, pg, 300, silentLogger);
    const producer = uniq('it.idem');
    const [a, b] = [msg(), msg()];
    expect(await store.claim(producer, 'k', a)).toEqual({ kind: 'new' });
    expect(await store.claim(producer, 'k', b)).toEqual({ kind: 'duplicate', messageId: a });
    // The same message again (a replayed Kafka record) still owns its key: forwarded again.
    expect(await store.claim(producer, 'k', a)).toEqual({ kind: 'new' });
    const row = await pg.query("SELECT message_id, expires_at > now() + interval '290 seconds' AS fresh FROM idempotency_keys WHERE producer = $1", [producer]);
    expect(row.rows).toEqual([{ message_id: a, fresh: true }]);
    expect(await redis.ttl(idempotencyRedisKey(producer, 'k'))).toBeGreaterThan(290);
  });

  it('decides from PostgreSQL while Redis is down', async () => {
    const producer = uniq('it.idem');
    const [a, b] = [msg(), msg()];
    await new IdempotencyStore(redis, pg, 300, silentLogger).claim(producer, 'k', a);
    const degraded = new IdempotencyStore(deadRedis, pg, 300, silentLogger);
    expect(await degraded.claim(producer, 'k', b)).toEqual({ kind: 'duplicate', messageId: a });
    expect(await degraded.claim(producer, 'other', b)).toEqual({ kind: 'new' });
  });

  it('decides from Redis while PostgreSQL is down', async () => {
    const producer = uniq('it.idem');
    const [a, b] = [msg(), msg()];
    const degraded = new IdempotencyStore(redis, deadPg, 300, silentLogger);
    expect(await degraded.claim(producer, 'k', a)).toEqual({ kind: 'new' });
    expect(await degraded.claim(producer, 'k', b)).toEqual({ kind: 'duplicate', messageId: a });
  });

  it('fails with 5002 (retryable) when neither store answers', async () => {
    const store = new IdempotencyStore(deadRedis, deadPg, 300, silentLogger);
    const err = await store.claim(uniq('it.idem'), 'k', msg()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ReachError);
    expect(err).toMatchObject({ code: 5002, retryable: true });
  });

  it('lets an expired PostgreSQL key be taken by a new message', async () => {
    const producer = uniq('it.idem');
    const [a, b] = [msg(), msg()];
    await pg.query(
      "INSERT INTO idempotency_keys (producer, idempotency_key, message_id, created_at, expires_at) VALUES ($1, 'k', $2, now() - interval '2 days', now() - interval '1 day')",
      [producer, a],
    );
    const store = new IdempotencyStore(redis, pg, 300, silentLogger);
    expect(await store.claim(producer, 'k', b)).toEqual({ kind: 'new' });
    expect((await pg.query('SELECT message_id FROM idempotency_keys WHERE producer = $1', [producer])).rows).toEqual([{ message_id: b }]);
  });

  it('releases a key only for the message that holds it', async () => {
    const store = new IdempotencyStore(redis, pg, 300, silentLogger);
    const producer = uniq('it.idem');
    const [a, b, c] = [msg(), msg(), msg()];
    await store.claim(producer, 'k', a);
    await store.release(producer, 'k', b);
    expect(await store.claim(producer, 'k', c)).toEqual({ kind: 'duplicate', messageId: a });
    await store.release(producer, 'k', a);
    expect(await store.claim(producer, 'k', c)).toEqual({ kind: 'new' });
  });

  it('hands a key to exactly one of many concurrent claimants', async () => {
    const store = new IdempotencyStore(redis, pg, 300, silentLogger);
    const producer = uniq('it.idem');
    const ids = Array.from({ length: 20 }, msg);
    const claims = await Promise.all(ids.map((id) => store.claim(producer, 'k', id)));
    const winners = ids.filter((_, i) => claims[i]!.kind === 'new');
    expect(winners).toHaveLength(1);
    for (const c of claims) if (c.kind === 'duplicate') expect(c.messageId).toBe(winners[0]);
  });

  it('claims concurrent keys in a few PostgreSQL statements, not one per message', async () => {
    const { pool, statements } = counting(pg);
    const store = new IdempotencyStore(redis, pool, 300, silentLogger);
    const producer = uniq('it.idem');
    const ids = Array.from({ length: 40 }, msg);
    const claims = await Promise.all(ids.map((id, i) => store.claim(producer, `k${i}`, id)));
    expect(claims.every((c) => c.kind === 'new')).toBe(true);
    // Redis answers the 40 in one or a few socket reads; each read's claims share a statement.
    expect(statements()).toBeLessThan(5);
    const rows = await pg.query('SELECT count(*)::int AS n FROM idempotency_keys WHERE producer = $1', [producer]);
    expect(rows.rows[0]).toEqual({ n: 40 });
  });

  it('gives a key named twice in one batch to its first claimant', async () => {
    const claims = new PgClaims(pg, 300);
    const producer = uniq('it.idem');
    const [a, b, c] = [msg(), msg(), msg()];
    const holders = await Promise.all([claims.claim(producer, 'k', a), claims.claim(producer, 'k', b), claims.claim(producer, 'other', c)]);
    expect(holders).toEqual([a, a, c]);
    expect(await claims.claim(producer, 'k', b)).toBe(a);
  });

  it('stops asking a PostgreSQL that failed for a while, Redis deciding alone', async () => {
    const { pool, statements } = counting(deadPg);
    const store = new IdempotencyStore(redis, pool, 300, silentLogger);
    const producer = uniq('it.idem');
    const [a, b, c] = [msg(), msg(), msg()];
    expect(await store.claim(producer, 'k1', a)).toEqual({ kind: 'new' });
    expect(statements()).toBe(1);
    // Within PG_RETRY_AFTER_MS: decided by Redis, PostgreSQL not asked.
    expect(await store.claim(producer, 'k2', b)).toEqual({ kind: 'new' });
    expect(await store.claim(producer, 'k1', c)).toEqual({ kind: 'duplicate', messageId: a });
    expect(statements()).toBe(1);
  });
});
