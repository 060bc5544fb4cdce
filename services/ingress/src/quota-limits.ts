import { ReachError, ENVELOPE_NAME_PATTERN } from '@reach/core';

/** A producer's quota (R-D7): a token bucket refilled at `ratePerS`, holding at most `burst`. */
export interface QuotaLimit {
  readonly ratePerS: number;
  readonly burst: number;
}

// Bounds of an override: a rate below one message in ~17 minutes or a bucket of zero would lock
// a producer out (that is what revoking its token is for); above these a quota limits nothing.
export const MIN_RATE_PER_S = 0.001;
export const MAX_RATE_PER_S = 1_000_000;
export const MAX_BURST = 10_000_000;

function invalid(field: string, message: string): never {
  throw new ReachError('INVALID_ENVELOPE', `${field}: ${message}`, { details: { field } });
}

export function checkAgentId(agentId: string): string {
  if (!ENVELOPE_NAME_PATTERN.test(agentId)) invalid('agent_id', 'must be an agent id (letters, digits and _.:-@/, at most 200 characters)');
  return agentId;
}

/**
 * The burst of an override that gives none: the default quota's proportion (200 for 100 msg/s
 * means two seconds' worth), so raising the rate raises the burst with it.
 */
export function defaultBurstFor(ratePerS: number, defaults: QuotaLimit): number {
  return Math.min(MAX_BURST, Math.max(1, Math.ceil((ratePerS * defaults.burst) / defaults.ratePerS)));
}

/**
 * The body of `PUT /v1/quotas/{agent_id}` (docs/design.md §3): `{rate_per_s, burst?}`. Numbers must be
 * JSON numbers, not strings; unknown fields are refused so a typo (`rate`) never silently
 * leaves the old value in place. Throws 4101 naming the field.
 */
export function parseQuotaBody(body: unknown, defaults: QuotaLimit): QuotaLimit {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) invalid('body', 'must be a JSON object {"rate_per_s": number, "burst": integer}');
  const b = body as Record<string, unknown>;
  const unknown = Object.keys(b).filter((k) => k !== 'rate_per_s' && k !== 'burst');
  if (unknown.length > 0) invalid(unknown[0]!, `unknown field (expected rate_per_s and burst)`);
  const rate = b.rate_per_s;
  if (rate === undefined || rate === null) invalid('rate_per_s', 'is required');
  if (typeof rate !== 'number' || !Number.isFinite(rate)) invalid('rate_per_s', 'must be a number');
  if (rate < MIN_RATE_PER_S || rate > MAX_RATE_PER_S) invalid('rate_per_s', `must be in [${MIN_RATE_PER_S}, ${MAX_RATE_PER_S}] messages per second`);
  const burst = b.burst;
  if (burst === undefined || burst === null) return { ratePerS: rate, burst: defaultBurstFor(rate, defaults) };
  if (typeof burst !== 'number' || !Number.isInteger(burst)) invalid('burst', 'must be an integer');
  if (burst < 1 || burst > MAX_BURST) invalid('burst', `must be in [1, ${MAX_BURST}]`);
  return { ratePerS: rate, burst };
}

/** `Retry-After` in whole seconds (RFC 9110 allows no fractions): rounded up, at least 1. */
export function retryAfterSeconds(waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs / 1000));
}

/** A bucket's state: tokens left at time `atMs`. */
export interface BucketState {
  tokens: number;
  atMs: number;
}

export interface TakeResult {
  readonly allowed: boolean;
  /** How long until `cost` tokens are back (0 when allowed). */
  readonly waitMs: number;
  readonly state: BucketState;
}

/**
 * One token-bucket step, the same arithmetic as the Redis script (quota-buckets.ts): refill for
 * the time since the last step, capped at the burst; take `cost` tokens if there are enough.
 * A negative cost gives tokens back (a duplicate that was not admitted after all). A clock that
 * went backwards refills nothing and keeps the later time, so no interval is credited twice.
 */
export function takeTokens(prev: BucketState | undefined, limit: QuotaLimit, nowMs: number, cost = 1): TakeResult {
  const atMs = prev ? Math.max(prev.atMs, nowMs) : nowMs;
  let tokens = prev ? Math.min(limit.burst, prev.tokens + (Math.max(0, nowMs - prev.atMs) * limit.ratePerS) / 1000) : limit.burst;
  if (cost <= 0) return { allowed: true, waitMs: 0, state: { tokens: Math.min(limit.burst, tokens - cost), atMs } };
  if (tokens >= cost) {
    tokens -= cost;
    return { allowed: true, waitMs: 0, state: { tokens, atMs } };
  }
  return { allowed: false, waitMs: Math.ceil(((cost - tokens) * 1000) / limit.ratePerS), state: { tokens, atMs } };
}

/** How a quota reads in the admin API. */
export function quotaJson(agentId: string, limit: QuotaLimit, source: 'override' | 'default', updatedAt: Date | null): Record<string, unknown> {
  return { agent_id: agentId, rate_per_s: limit.ratePerS, burst: limit.burst, source, updated_at: updatedAt ? updatedAt.toISOString() : null };
}
