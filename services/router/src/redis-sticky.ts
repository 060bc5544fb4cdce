import type { Logger } from '@reach/core';
import type { StickyStore } from '@reach/routing';
import { createRedis, type Redis } from '@reach/store';
import type { MemoStore } from './decision-memo.js';

/** A sticky-store call slower than this counts as "Redis is down" for this message. */
const STICKY_TIMEOUT_MS = 100;
/**
 * The decision memo's calls may take longer: a memo missed for a record consumed again sends
 * it to a second agent (the task run twice), while a slow one only delays routing. At 100 ms
 * the burst after a broker restart (the backlog of 15 s at 500 msg/s) timed memo reads out on
 * the busy event loop, and 27 tasks ran twice (`pnpm chaos --faults kill-kafka`).
 */
export const MEMO_TIMEOUT_MS = 2_000;

/** How a store's client waits: `fast` for sticky bindings, `patient` for the decision memo. */
export interface StoreWaits {
  timeoutMs: number;
  /**
   * Queue calls while the connection is (re)established instead of failing them: a router just
   * restarted consumes its first records before its client is connected, and exactly those are
   * the repeats whose memo matters (`pnpm chaos --long`: records re-routed to a second agent).
   */
  queueWhileConnecting: boolean;
  connectionName: string;
}

export const STICKY_WAITS: StoreWaits = { timeoutMs: STICKY_TIMEOUT_MS, queueWhileConnecting: false, connectionName: 'reach-router-sticky' };
export const MEMO_WAITS: StoreWaits = { timeoutMs: MEMO_TIMEOUT_MS, queueWhileConnecting: true, connectionName: 'reach-router-memo' };

class StickyUnavailable extends Error {}

/**
 * Session bindings in Redis (R-B6) on a client of the router's own that fails fast: no
 * offline queue and a short per-call timeout, so while Redis is away each message falls back
 * to the session hash at once instead of waiting (R-D12: routing continues).
 */
export class RedisStickyStore implements StickyStore {
  private readonly redis: Redis;

  constructor(
    url: string,
    logger: Logger,
    private readonly waits: StoreWaits = STICKY_WAITS,
  ) {
    this.redis = createRedis(url, logger, {
      enableOfflineQueue: waits.queueWhileConnecting,
      maxRetriesPerRequest: 0,
      connectTimeoutMs: 1_000,
      maxReconnectDelayMs: 2_000,
      connectionName: waits.connectionName,
      // the calls of 16 concurrent handlers
      autoPipelining: true,
    });
  }

  private bounded<T>(op: () => Promise<T>): Promise<T> {
    if (!this.waits.queueWhileConnecting && this.redis.status !== 'ready') return Promise.reject(new StickyUnavailable(`redis is ${this.redis.status}`));
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new StickyUnavailable(`redis did not answer within ${this.waits.timeoutMs} ms`)), this.waits.timeoutMs);
      op().then(
        (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err instanceof Error ? err : new StickyUnavailable(String(err)));
        },
      );
    });
  }

  get(key: string): Promise<string | null> {
    return this.bounded(() => this.redis.get(key));
  }

  async set(key: string, agentId: string, ttlS: number): Promise<void> {
    await this.bounded(() => this.redis.set(key, agentId, 'EX', ttlS));
  }

  /** The decision memo's reads and writes (decision-memo.ts), on this client. */
  memo(): MemoStore {
    return {
      read: (key, field) => this.bounded(() => this.redis.hget(key, field)),
      write: async (hashes) => {
        const pipe = this.redis.pipeline();
        for (const h of hashes) pipe.hset(h.key, h.fields).expireat(h.key, h.expireAtS);
        const replies = await this.bounded(() => pipe.exec());
        const failed = replies?.find(([err]) => err)?.[0];
        if (failed) throw failed;
      },
    };
  }

  get ready(): boolean {
    return this.redis.status === 'ready';
  }

  async close(): Promise<void> {
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }
}
