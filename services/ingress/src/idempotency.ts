import { ReachError, type Logger } from '@reach/core';
import type { Pool, Redis } from '@reach/store';

/** `new`: this message owns the key. `duplicate`: another message took it first. */
export type IdempotencyClaim = { readonly kind: 'new' } | { readonly kind: 'duplicate'; readonly messageId: string };

/** The Redis key of an idempotency key (SPEC R-D5). */
export function idempotencyRedisKey(producer: string, key: string): string {
  return `reach:idem:${producer}:${key}`;
}

// SET NX that also says who holds the key when it exists, in one atomic round trip. (SET … NX
// GET does the same from Redis 7.0 on; the script works on any Redis a deployment may have.)
const CLAIM_SCRIPT = `
local held = redis.call('GET', KEYS[1])
if held then return held end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return false`;

// Deletes the key only while it still names this message.
const RELEASE_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

// One statement: take the key (or an expired row of it), else report who holds it. The
// fallback SELECT sees the snapshot from before the statement; a holder that committed during
// it is found by the caller's second try.
const CLAIM_SQL = `
WITH claimed AS (
  INSERT INTO idempotency_keys (producer, idempotency_key, message_id, expires_at)
  VALUES ($1, $2, $3, now() + make_interval(secs => $4))
  ON CONFLICT (producer, idempotency_key) DO UPDATE
    SET message_id = excluded.message_id, created_at = now(), expires_at = excluded.expires_at
    WHERE idempotency_keys.expires_at <= now()
  RETURNING message_id
)
SELECT message_id FROM claimed
UNION ALL
SELECT message_id FROM idempotency_keys
 WHERE producer = $1 AND idempotency_key = $2 AND NOT EXISTS (SELECT 1 FROM claimed)`;

/**
 * Idempotency keys (SPEC R-D5): Redis SET NX with a TTL is the fast path; the PostgreSQL table
 * `idempotency_keys` (unique on producer + key) is the durable backstop that still answers
 * "duplicate" when Redis lost the key or is down. Either store alone is enough to decide; only
 * when both are unreachable does a claim fail (5002, retryable).
 *
 * The same message claiming its own key again (a Kafka record replayed after a crash between
 * claiming and producing) counts as `new`, so a replay is forwarded again rather than lost.
 */
export class IdempotencyStore {
  constructor(
    private readonly redis: Redis,
    private readonly pg: Pool,
    private readonly ttlS: number,
    private readonly log: Logger,
  ) {}

  async claim(producer: string, key: string, messageId: string): Promise<IdempotencyClaim> {
    const redisKey = idempotencyRedisKey(producer, key);
    // null: Redis took the key for us; a string: its holder; undefined: Redis is unavailable.
    let redisHolder: string | null | undefined;
    try {
      redisHolder = (await this.redis.eval(CLAIM_SCRIPT, 1, redisKey, messageId, String(this.ttlS))) as string | null;
    } catch (err) {
      this.log.warn({ err, message_id: messageId }, 'idempotency: Redis unavailable; deciding from PostgreSQL');
    }
    if (typeof redisHolder === 'string' && redisHolder !== messageId) return { kind: 'duplicate', messageId: redisHolder };

    let pgHolder: string | undefined;
    try {
      pgHolder = await this.claimInPg(producer, key, messageId);
    } catch (err) {
      if (redisHolder === undefined) {
        throw new ReachError('DEPENDENCY_UNAVAILABLE', 'idempotency keys unavailable: neither Redis nor PostgreSQL answered', { cause: err });
      }
      // Redis decided; the durable copy is missing for this key (a later Redis loss could let a
      // duplicate through, which the at-least-once contract tolerates).
      this.log.warn({ err, message_id: messageId }, 'idempotency: PostgreSQL unavailable; decided by Redis alone');
      return { kind: 'new' };
    }
    if (pgHolder === messageId) return { kind: 'new' };
    // Redis had lost the key (expired early, flushed, failed over): PostgreSQL remembers. Put
    // the holder back into Redis so the next duplicate is answered on the fast path.
    if (redisHolder !== undefined) {
      await this.redis.set(redisKey, pgHolder, 'EX', this.ttlS).catch((err: unknown) => this.log.warn({ err }, 'idempotency: could not repair the Redis key'));
    }
    return { kind: 'duplicate', messageId: pgHolder };
  }

  /**
   * Who holds a key according to Redis alone, without claiming it (undefined: no holder there,
   * or Redis did not answer). A cheap hint, e.g. to answer a duplicate that arrives over quota.
   */
  async holder(producer: string, key: string): Promise<string | undefined> {
    try {
      return (await this.redis.get(idempotencyRedisKey(producer, key))) ?? undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Gives a key back when its message could not be handed to Kafka, so the sender's retry is
   * accepted instead of answered "duplicate" of a message that never went anywhere. Best effort.
   */
  async release(producer: string, key: string, messageId: string): Promise<void> {
    await Promise.all([
      this.redis
        .eval(RELEASE_SCRIPT, 1, idempotencyRedisKey(producer, key), messageId)
        .catch((err: unknown) => this.log.warn({ err, message_id: messageId }, 'idempotency: could not release the Redis key')),
      this.pg
        .query('DELETE FROM idempotency_keys WHERE producer = $1 AND idempotency_key = $2 AND message_id = $3', [producer, key, messageId])
        .catch((err: unknown) => this.log.warn({ err, message_id: messageId }, 'idempotency: could not release the PostgreSQL key')),
    ]);
  }

  private async claimInPg(producer: string, key: string, messageId: string): Promise<string> {
    for (let tries = 0; tries < 3; tries++) {
      const res = await this.pg.query<{ message_id: string }>(CLAIM_SQL, [producer, key, messageId, this.ttlS]);
      const holder = res.rows[0]?.message_id;
      if (holder !== undefined) return holder;
      // The holder committed while our statement ran (invisible to its snapshot): ask again.
    }
    throw new ReachError('DEPENDENCY_UNAVAILABLE', 'idempotency key could neither be claimed nor read');
  }
}
