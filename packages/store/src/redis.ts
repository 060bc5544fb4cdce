import { readFileSync } from 'node:fs';
import { Redis, type RedisOptions } from 'ioredis';
import { redactUrl, type Logger } from '@reach/core';

/**
 * The one place Agent-Reach creates Redis clients. Redis holds hot, expiring state only, and
 * every user of it has a fallback (R-D12: "Redis down: routing continues from local
 * state"), so a client must fail commands quickly while Redis is away and reconnect by itself,
 * never hang a caller or crash the process.
 */
export interface RedisClientOptions {
  /** Attempts per command across reconnects before it fails; small so callers fall back fast. */
  maxRetriesPerRequest?: number;
  /**
   * Queue commands while disconnected (ioredis default) or fail them at once. Hot paths that
   * have a fallback (rate buckets, routing state) want `false`: a queued command would only
   * add latency and then fail anyway.
   */
  enableOfflineQueue?: boolean;
  /** Cap of the reconnect backoff (ms). Reconnects never stop: Redis coming back must heal. */
  maxReconnectDelayMs?: number;
  connectTimeoutMs?: number;
  /** Visible in `CLIENT LIST`, so an operator can tell the services apart. */
  connectionName?: string;
  /** Do not connect until the first command (or `connect()`). */
  lazyConnect?: boolean;
  /**
   * Send the commands issued in one event-loop turn as one pipeline (one socket write, one
   * read on the server). For clients that many concurrent handlers share on a hot path.
   */
  autoPipelining?: boolean;
  /**
   * Fail a command that has no reply after this long (ms; unset: wait forever). A connected
   * but stalled Redis (paused, overloaded) never drops the socket, so without it a caller with
   * a fallback would wait for the stall to end instead of using the fallback.
   */
  commandTimeoutMs?: number;
}

/** Reconnect delay: 100 ms doubling per attempt, capped. Exported for tests. */
export function reconnectDelay(times: number, capMs: number): number {
  const exp = Math.min(Math.max(times - 1, 0), 16);
  return Math.min(100 * 2 ** exp, capMs);
}

/**
 * TLS and passwords come with the URL (docs/transport-security.md): `rediss://` for TLS,
 * `redis://:password@host` or `redis://user:password@host` (ACL) for auth, and
 * `?ca_file=/path/ca.pem` for a private CA of a `rediss://` server (the system store otherwise).
 * Returns the URL ioredis should see (without `ca_file`, which it would take as an option) and
 * the TLS options.
 */
export function redisConnection(url: string, readFile: (path: string) => string = (p) => readFileSync(p, 'utf8')): { url: string; tls?: { ca: string } } {
  const u = new URL(url);
  const caFile = u.searchParams.get('ca_file');
  if (caFile === null) return { url };
  if (u.protocol !== 'rediss:') throw new Error(`${redactUrl(url)}: ca_file needs a rediss:// (TLS) URL`);
  u.searchParams.delete('ca_file');
  let ca: string;
  try {
    ca = readFile(caFile);
  } catch (err) {
    throw new Error(`${redactUrl(url)}: ca_file ${caFile} cannot be read: ${(err as Error).message}`);
  }
  return { url: u.toString(), tls: { ca } };
}

export function createRedis(url: string, logger: Logger, opts: RedisClientOptions = {}): Redis {
  const log = logger.child({ component: 'redis' });
  const cap = opts.maxReconnectDelayMs ?? 5_000;
  const options: RedisOptions = {
    maxRetriesPerRequest: opts.maxRetriesPerRequest ?? 2,
    enableOfflineQueue: opts.enableOfflineQueue ?? true,
    connectTimeout: opts.connectTimeoutMs ?? 3_000,
    lazyConnect: opts.lazyConnect ?? false,
    // Returning a number (never null) keeps ioredis reconnecting forever.
    retryStrategy: (times) => reconnectDelay(times, cap),
    // A replica promoted or a failover in progress answers READONLY: reconnect to find the
    // writable node instead of failing every write until restart.
    reconnectOnError: (err) => (err.message.startsWith('READONLY') ? 2 : false),
  };
  if (opts.connectionName) options.connectionName = opts.connectionName;
  if (opts.autoPipelining) options.enableAutoPipelining = true;
  if (opts.commandTimeoutMs !== undefined) options.commandTimeout = opts.commandTimeoutMs;
  const conn = redisConnection(url);
  if (conn.tls) options.tls = conn.tls;
  const redis = new Redis(conn.url, options);

  // While Redis is down ioredis emits 'error' on every reconnect attempt; log the first of a
  // run at warn and the rest at debug, so an outage is one visible line, not a flood. The
  // listener also keeps the errors from being unhandled 'error' events, which would crash.
  let failing = false;
  redis.on('error', (err: Error) => {
    const fields = { err: { message: err.message, code: (err as { code?: unknown }).code } };
    if (!failing) log.warn(fields, 'redis: connection error');
    else log.debug(fields, 'redis: connection error (still failing)');
    failing = true;
  });
  redis.on('connect', () => log.debug('redis: connected'));
  redis.on('ready', () => {
    if (failing) log.info('redis: connection restored');
    else log.info('redis: ready');
    failing = false;
  });
  redis.on('reconnecting', (delayMs: number) => log.debug({ delayMs }, 'redis: reconnecting'));
  redis.on('end', () => log.debug('redis: connection closed'));
  return redis;
}

export type { Redis, RedisOptions } from 'ioredis';

/**
 * The dispatcher's ack journal: acks taken from an agent's buffer whose DELIVERED event may not
 * be written yet (hash: message id → entry; sorted set: message id by ack time). The
 * retry-scheduler's stuck sweep reads it so it never declares DEAD a message an agent acked.
 */
export const ACK_JOURNAL = {
  acked: 'reach:acked',
  ackedAt: 'reach:acked-at',
  /**
   * Acks whose DELIVERED left the journal at or after their message's budget end (sorted set:
   * message id → when; kept ACKED_LATE_KEEP_MS). Such a DELIVERED was appended after the
   * deadline, so the read-model watermark (complete up to the deadline) does not cover it: with
   * the tracker behind (PostgreSQL restarting), the stuck sweep saw the message DELIVERING,
   * found no journaled ack, and declared a DELIVERED message DEAD (`pnpm chaos --long`: 20).
   */
  ackedLate: 'reach:acked-late',
} as const;
/** How long an ack settled late stays in ACK_JOURNAL.ackedLate: longer than the tracker may lag. */
export const ACKED_LATE_KEEP_MS = 3_600_000;

/**
 * Deliveries whose agent reports progress (sorted set: message id → until when the last
 * `progress` frame holds it). The dispatcher writes it when a progress frame extends an ack
 * deadline; the stuck sweep skips these: a long task whose agent is alive and working is not
 * stuck, even past its budget (its deadline sweeper retries it if the agent goes away).
 */
export const WORK_IN_PROGRESS = 'reach:in-progress';

/**
 * Messages the stuck sweep declared DEAD (sorted set: message id → when). The sweep marks a
 * message in one script with its checks of the ack journal and WORK_IN_PROGRESS, and the
 * dispatcher's take script refuses an answer to a marked message: so of an ack and the sweep's
 * DEAD exactly one wins, and a message the sender was told is DEAD never turns DELIVERED (an
 * agent that reconnects long after the budget and resends its ack).
 */
export const ENDED_MESSAGES = 'reach:ended';
