import { ReachError, type Logger } from '@reach/core';
import type { Pool, Redis } from '@reach/store';
import { PgClaims } from './pg-claims.js';

/** `new`: this message owns the key. `duplicate`: another message took it first. */
export type IdempotencyClaim = { readonly kind: 'new' } | { readonly kind: 'duplicate'; readonly messageId: string };

/**
 * After PostgreSQL failed a claim, claims Redis decides skip it for this long (then one batch
 * tries it again): a PostgreSQL that is down or restarting costs each claim a failed connect,
 * which held ingress to a third of its rate through `kill -9` of PostgreSQL (`pnpm chaos`).
 */
export const PG_RETRY_AFTER_MS = 1_000;

/** The Redis key of an idempotency key (R-D5). */
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

/**
 * Idempotency keys (R-D5): Redis SET NX with a TTL is the fast path; the PostgreSQL table
 * `idempotency_keys` (unique on producer + key) is the durable backstop that still answers
 * "duplicate" when Redis lost the key or is down (claimed in batches: pg-claims.ts). Either
 * store alone is enough to decide; only when both are unreachable does a claim fail (5002,
 * retryable). After a failed PostgreSQL claim, Redis alone decides for PG_RETRY_AFTER_MS.
 *
 * The same message claiming its own key again (a Kafka record replayed after a crash between
 * claiming and producing) counts as `new`, so a replay is forwarded again rather than lost.
 */
export class IdempotencyStore {
  private readonly pgClaims: PgClaims;
  /** Until when PostgreSQL counts as away (epoch ms; 0: it answers): Redis alone decides meanwhile. */
  private pgAwayUntil = 0;
  /** Set while Redis is away, so an outage is logged once, not once per message. */
  private redisAway = false;

  constructor(
    private readonly redis: Redis,
    private readonly pg: Pool,
    private readonly ttlS: number,
    private readonly log: Logger,
  ) {
    this.pgClaims = new PgClaims(pg, ttlS);
  }

  async claim(producer: string, key: string, messageId: string): Promise<IdempotencyClaim> {
    const redisKey = idempotencyRedisKey(producer, key);
    // null: Redis took the key for us; a string: its holder; undefined: Redis is unavailable.
    let redisHolder: string | null | undefined;
    try {
      redisHolder = (await this.redis.eval(CLAIM_SCRIPT, 1, redisKey, messageId, String(this.ttlS))) as string | null;
      if (this.redisAway) this.log.info('idempotency: Redis answers again');
      this.redisAway = false;
    } catch (err) {
      if (!this.redisAway) this.log.warn({ err, message_id: messageId }, 'idempotency: Redis unavailable; deciding from PostgreSQL until it answers');
      this.redisAway = true;
    }
    if (typeof redisHolder === 'string' && redisHolder !== messageId) return { kind: 'duplicate', messageId: redisHolder };
    // Redis decided; the durable copy is missing for this key while PostgreSQL is away (a
    // later Redis loss could let a duplicate through, which the at-least-once contract tolerates).
    if (redisHolder !== undefined && Date.now() < this.pgAwayUntil) return { kind: 'new' };

    let pgHolder: string;
    try {
      pgHolder = await this.pgClaims.claim(producer, key, messageId);
      if (this.pgAwayUntil > 0) this.log.info('idempotency: PostgreSQL answers again');
      this.pgAwayUntil = 0;
    } catch (err) {
      if (redisHolder === undefined) {
        throw new ReachError('DEPENDENCY_UNAVAILABLE', 'idempotency keys unavailable: neither Redis nor PostgreSQL answered', { cause: err });
      }
      if (this.pgAwayUntil === 0)
        this.log.warn({ err, message_id: messageId }, 'idempotency: PostgreSQL unavailable; deciding by Redis alone until it answers');
      this.pgAwayUntil = Date.now() + PG_RETRY_AFTER_MS;
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
}
