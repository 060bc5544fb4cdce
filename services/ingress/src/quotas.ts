import { ReachError } from '@reach/core';
import type { Envelope } from '@reach/envelope';
import type { QuotaBuckets } from './quota-buckets.js';
import { retryAfterSeconds } from './quota-limits.js';
import type { QuotaOverrides } from './quota-overrides.js';

export type QuotaVerdict =
  | { readonly kind: 'admitted' }
  /** Over quota: refuse with this 4129 (details carry retry_after_s for the Retry-After header). */
  | { readonly kind: 'limited'; readonly error: ReachError }
  /** Over quota, but the idempotency key already belongs to an accepted message: answer as a duplicate. */
  | { readonly kind: 'duplicate'; readonly messageId: string };

/** What the Acceptor asks of quotas; absent, producers are not rate-limited. */
export interface QuotaGate {
  /** `atMs`: when the message was produced (a Kafka record's timestamp); unset: now. */
  admit(envelope: Envelope, atMs?: number): Promise<QuotaVerdict>;
  /** Returns the token of an admitted message that turned out to be a duplicate. */
  giveBack(producer: string): Promise<void>;
}

/** Who holds an idempotency key, from the fast store only (undefined: nobody, or unknown). */
export type KeyHolder = (producer: string, key: string) => Promise<string | undefined>;

/**
 * Per-producer quotas (R-D7): the override or default limit of the producer (from the local
 * view of PostgreSQL) applied to its shared token bucket (Redis). Resubmissions under an
 * idempotency key never cost quota twice: an admitted duplicate gives its token back, and a
 * duplicate that arrives while the producer is over quota is still answered as the duplicate
 * (one Redis GET, paid only on that refusal path) instead of a 429 for a message that was
 * accepted long ago.
 */
export class Quotas implements QuotaGate {
  constructor(
    private readonly overrides: QuotaOverrides,
    private readonly buckets: QuotaBuckets,
    private readonly holderOf: KeyHolder,
  ) {}

  async admit(env: Envelope, atMs?: number): Promise<QuotaVerdict> {
    const limit = this.overrides.limitFor(env.producer);
    const decision = await this.buckets.take(env.producer, limit, 1, atMs);
    if (decision.allowed) return { kind: 'admitted' };
    if (env.idempotency_key !== null && !this.buckets.degraded) {
      const holder = await this.holderOf(env.producer, env.idempotency_key);
      if (holder !== undefined && holder !== env.message_id) return { kind: 'duplicate', messageId: holder };
    }
    const retryAfterS = retryAfterSeconds(decision.waitMs);
    return {
      kind: 'limited',
      error: new ReachError(
        'RATE_LIMITED',
        `producer ${env.producer} is over its quota of ${limit.ratePerS} msg/s (burst ${limit.burst}); retry in ${retryAfterS} s`,
        { details: { retry_after_s: retryAfterS, retry_after_ms: decision.waitMs, rate_per_s: limit.ratePerS, burst: limit.burst } },
      ),
    };
  }

  async giveBack(producer: string): Promise<void> {
    await this.buckets.take(producer, this.overrides.limitFor(producer), -1);
  }
}
