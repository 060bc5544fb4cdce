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
// as no key at all, so idle producers cost no memory. A positive cost is a number of one-token
// decisions taken at once, for one script instead of one each, in order, each at its own time
// (ARGV[4], comma-separated: µs, never later than Redis's clock, or 'n' for now). A Kafka
// backlog consumed after an ingress outage is so judged at the pace it was produced, not at the
// pace it is caught up with, and a producer that kept to its quota is not refused for the
// outage; HTTP submissions are decided now.
// KEYS[1] bucket · ARGV rate_per_s, burst, cost (negative: give tokens back), times
// → {admitted (1 for a give-back), wait_us until the next token when short, tokens·1000,
//    '1'/'0' per decision ('' for a give-back)}
const TAKE_SCRIPT = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local server = tonumber(t[1]) * 1000000 + tonumber(t[2])
local s = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(s[1])
local ts = tonumber(s[2])
local function refill(now)
  if tokens == nil or ts == nil then
    tokens = burst
    ts = now
  elseif now > ts then
    tokens = math.min(burst, tokens + (now - ts) * rate / 1000000)
    ts = now
  else
    tokens = math.min(burst, tokens)
  end
end
local admitted = 0
local wait_us = 0
local bits = ''
if cost <= 0 then
  refill(server)
  tokens = math.min(burst, tokens - cost)
  admitted = 1
else
  local out = {}
  for at in string.gmatch(ARGV[4], '[^,]+') do
    refill(at == 'n' and server or math.min(server, tonumber(at)))
    if tokens >= 1 then
      tokens = tokens - 1
      admitted = admitted + 1
      out[#out + 1] = '1'
    else
      out[#out + 1] = '0'
      wait_us = math.ceil((1 - tokens) * 1000000 / rate)
    end
  end
  bits = table.concat(out)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'ts', string.format('%.0f', ts))
local full_ms = math.ceil((burst - tokens) * 1000 / rate) + 1000
redis.call('PEXPIRE', KEYS[1], math.min(full_ms, 86400000))
return {admitted, wait_us, math.floor(tokens * 1000), bits}`;

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

/** One script's answer for `count` one-token decisions of a producer. */
interface Taken {
  admitted: number;
  waitMs: number;
  local: boolean;
  /** Per decision, in order (true: admitted); empty for a give-back. */
  each: readonly boolean[];
}

/** When each decision is taken, in ms (unset: now, which the take script reads as Redis's clock). */
type Times = ReadonlyArray<number | undefined>;

/**
 * Per-producer token buckets shared by every ingress instance (R-D7): a Lua script in
 * Redis decides, so concurrent instances never over-admit by racing a read-modify-write. The
 * decisions asked for one producer in the same tick (the records of a Kafka fetch, concurrent
 * HTTP submissions) share one script call: at 1,000 msg/s that is one call per fetch instead of
 * five Redis commands a message (`pnpm bench`'s work table).
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
  private readonly queued = new Map<string, { limit: QuotaLimit; waiters: Array<(d: BucketDecision) => void>; times: Array<number | undefined> }>();
  private flushScheduled = false;

  constructor(
    private readonly redis: Redis,
    private readonly log: Logger,
    private readonly events: BucketEvents = { degraded: () => undefined, localDecision: () => undefined },
  ) {}

  /**
   * Takes one token from the producer's bucket (or, with cost -1, gives one back). `atMs`: when
   * the message was produced (a Kafka record's timestamp), the bucket's clock for it; never
   * later than now. Unset: now.
   */
  take(producer: string, limit: QuotaLimit, cost = 1, atMs?: number): Promise<BucketDecision> {
    if (cost !== 1) return this.decide(producer, limit, cost).then((t) => ({ allowed: t.admitted > 0, waitMs: t.waitMs, local: t.local }));
    return new Promise((resolve) => {
      let q = this.queued.get(producer);
      if (!q) this.queued.set(producer, (q = { limit, waiters: [], times: [] }));
      q.waiters.push(resolve);
      q.times.push(atMs);
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        // After this macrotask's microtasks: every decision asked for meanwhile goes along.
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    const queued = [...this.queued];
    this.queued.clear();
    for (const [producer, { limit, waiters, times }] of queued) {
      void this.decide(producer, limit, waiters.length, times).then((t) =>
        waiters.forEach((resolve, i) =>
          resolve(t.each[i] ? { allowed: true, waitMs: 0, local: t.local } : { allowed: false, waitMs: t.waitMs, local: t.local }),
        ),
      );
    }
  }

  /** `count` one-token decisions in one script (or a give-back, count ≤ 0), each at its time (unset: now); never rejects. */
  private async decide(producer: string, limit: QuotaLimit, count: number, times: Times = []): Promise<Taken> {
    const now = Date.now();
    if (!this.healthy && (this.probing || now < this.probeAt)) return this.takeLocal(producer, limit, count, times);
    const probe = !this.healthy;
    if (probe) this.probing = true;
    try {
      const [admitted, waitUs, , bits] = await this.evalTake(producer, limit, count, times);
      if (probe) this.recovered();
      return { admitted, waitMs: Math.ceil(waitUs / 1000), local: false, each: [...bits].map((b) => b === '1') };
    } catch (err) {
      this.failed(err, now);
      return this.takeLocal(producer, limit, count, times);
    } finally {
      if (probe) this.probing = false;
    }
  }

  get degraded(): boolean {
    return !this.healthy;
  }

  private async evalTake(producer: string, limit: QuotaLimit, cost: number, times: Times): Promise<[number, number, number, string]> {
    const timed = Array.from({ length: Math.max(1, cost) }, (_, i) => (times[i] === undefined ? 'n' : String(Math.floor(times[i]!) * 1000))).join(',');
    const args = [bucketKey(producer), String(limit.ratePerS), String(limit.burst), String(cost), timed];
    try {
      return (await this.redis.evalsha(TAKE_SHA, 1, ...args)) as [number, number, number, string];
    } catch (err) {
      // First use on this server (or after SCRIPT FLUSH / a failover): load it by sending it.
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return (await this.redis.eval(TAKE_SCRIPT, 1, ...args)) as [number, number, number, string];
    }
  }

  private takeLocal(producer: string, limit: QuotaLimit, count: number, times: Times): Taken {
    const now = Date.now();
    let state = this.local.get(producer);
    let admitted = 0;
    let waitMs = 0;
    const each: boolean[] = [];
    // A give-back is one step; `count` decisions are that many one-token steps, each at its time.
    for (let i = 0; i < Math.max(1, count); i++) {
      const r = takeTokens(state, limit, Math.min(now, times[i] ?? now), count <= 0 ? count : 1);
      state = r.state;
      each.push(r.allowed);
      if (r.allowed) admitted++;
      else waitMs = r.waitMs;
      this.events.localDecision();
    }
    this.local.set(producer, state!);
    if (this.local.size > MAX_LOCAL_BUCKETS) this.evictFull(now, limit);
    return { admitted, waitMs, local: true, each };
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
