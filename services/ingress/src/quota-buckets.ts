import { createHash } from 'node:crypto';
import type { Logger } from '@reach/core';
import type { Redis } from '@reach/store';
import { takeTokens, type BucketState, type QuotaLimit } from './quota-limits.js';

/** The Redis key of a producer's bucket; the hash tag keeps each producer's state on one slot. */
export function bucketKey(producer: string): string {
  return `reach:quota:{${producer}}:bucket`;
}

// One atomic token-bucket step (the arithmetic of takeTokens in quota-limits.ts), timed by the
// Redis server's clock so instances with skewed clocks share one notion of "now". State is a
// hash {tokens, ts(µs)}; the key expires once the bucket would be full again, which is the same
// as no key at all, so idle producers cost no memory.
// KEYS[1] bucket · ARGV rate_per_s, burst, cost (negative: give tokens back)
// → {allowed 0|1, wait_us, tokens·1000}
const TAKE_SCRIPT = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local s = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(s[1])
local ts = tonumber(s[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
elseif now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate / 1000000)
  ts = now
else
  tokens = math.min(burst, tokens)
end
local allowed = 0
local wait_us = 0
if cost <= 0 then
  tokens = math.min(burst, tokens - cost)
  allowed = 1
elseif tokens >= cost then
  tokens = tokens - cost
  allowed = 1
else
  wait_us = math.ceil((cost - tokens) * 1000000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'ts', string.format('%.0f', ts))
local full_ms = math.ceil((burst - tokens) * 1000 / rate) + 1000
redis.call('PEXPIRE', KEYS[1], math.min(full_ms, 86400000))
return {allowed, wait_us, math.floor(tokens * 1000)}`;

const TAKE_SHA = createHash('sha1').update(TAKE_SCRIPT).digest('hex');

export interface BucketDecision {
  readonly allowed: boolean;
  /** Until `cost` tokens are back; 0 when allowed. */
  readonly waitMs: number;
  /** Decided by this instance's local bucket because Redis was unavailable. */
  readonly local: boolean;
}

export interface BucketEvents {
  /** Redis became unavailable (true) or answered again (false). */
  degraded(on: boolean): void;
  /** A decision taken by the local fallback. */
  localDecision(): void;
}

/** After a failed Redis call, how long decisions stay local before one call probes Redis again. */
const PROBE_AFTER_MS = 1000;
/** Local buckets kept while degraded, at most; the fullest (idlest) go first. */
const MAX_LOCAL_BUCKETS = 100_000;

/**
 * Per-producer token buckets shared by every ingress instance (SPEC R-D7): one Lua script per
 * decision in Redis, so concurrent instances never over-admit by racing a read-modify-write.
 *
 * Redis unavailable (down, stalled, failing over): quotas must not cost availability, so the
 * decision falls back to a bucket in this process and nothing is refused or delayed for lack of
 * Redis. That local bucket enforces the full quota per instance (how many instances share the
 * traffic is unknown without Redis), so with N instances a producer may get up to N × its quota
 * until Redis answers again. The first failure switches to local decisions for PROBE_AFTER_MS;
 * then a single call probes Redis while the others stay local, so a stalled Redis costs one
 * command timeout per second, not one per message.
 */
export class QuotaBuckets {
  private healthy = true;
  private probeAt = 0;
  private probing = false;
  private readonly local = new Map<string, BucketState>();

  constructor(
    private readonly redis: Redis,
    private readonly log: Logger,
    private readonly events: BucketEvents = { degraded: () => undefined, localDecision: () => undefined },
  ) {}

  /** Takes one token from the producer's bucket (or, with cost -1, gives one back). */
  async take(producer: string, limit: QuotaLimit, cost = 1): Promise<BucketDecision> {
    const now = Date.now();
    if (!this.healthy && (this.probing || now < this.probeAt)) return this.takeLocal(producer, limit, now, cost);
    const probe = !this.healthy;
    if (probe) this.probing = true;
    try {
      const [allowed, waitUs] = await this.evalTake(producer, limit, cost);
      if (probe) this.recovered();
      return { allowed: allowed === 1, waitMs: Math.ceil(waitUs / 1000), local: false };
    } catch (err) {
      this.failed(err, now);
      return this.takeLocal(producer, limit, Date.now(), cost);
    } finally {
      if (probe) this.probing = false;
    }
  }

  get degraded(): boolean {
    return !this.healthy;
  }

  private async evalTake(producer: string, limit: QuotaLimit, cost: number): Promise<[number, number, number]> {
    const args = [bucketKey(producer), String(limit.ratePerS), String(limit.burst), String(cost)];
    try {
      return (await this.redis.evalsha(TAKE_SHA, 1, ...args)) as [number, number, number];
    } catch (err) {
      // First use on this server (or after SCRIPT FLUSH / a failover): load it by sending it.
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return (await this.redis.eval(TAKE_SCRIPT, 1, ...args)) as [number, number, number];
    }
  }

  private takeLocal(producer: string, limit: QuotaLimit, now: number, cost: number): BucketDecision {
    const r = takeTokens(this.local.get(producer), limit, now, cost);
    this.local.set(producer, r.state);
    if (this.local.size > MAX_LOCAL_BUCKETS) this.evictFull(now, limit);
    this.events.localDecision();
    return { allowed: r.allowed, waitMs: r.waitMs, local: true };
  }

  private evictFull(now: number, limit: QuotaLimit): void {
    // A bucket that has refilled completely is the same as no bucket. Which limit applies to each
    // is not kept here; judging by the current one only ever evicts a little early or late.
    for (const [producer, s] of this.local) {
      if (s.tokens + ((now - s.atMs) * limit.ratePerS) / 1000 >= limit.burst) this.local.delete(producer);
    }
    // Still too many (a flood of distinct producers): drop the oldest half rather than grow.
    if (this.local.size > MAX_LOCAL_BUCKETS) {
      let n = this.local.size / 2;
      for (const producer of this.local.keys()) {
        if (n-- <= 0) break;
        this.local.delete(producer);
      }
    }
  }

  private failed(err: unknown, now: number): void {
    this.probeAt = now + PROBE_AFTER_MS;
    if (!this.healthy) return;
    this.healthy = false;
    this.events.degraded(true);
    this.log.warn(
      { err: { message: (err as Error).message } },
      'quotas: Redis unavailable; deciding with per-instance local buckets (each instance admits up to the full quota) until it answers',
    );
  }

  private recovered(): void {
    this.healthy = true;
    this.local.clear();
    this.events.degraded(false);
    this.log.info('quotas: Redis answers again; buckets are shared across instances again');
  }
}
