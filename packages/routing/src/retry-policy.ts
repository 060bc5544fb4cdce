import {
  BUDGET_FROM_HEADER,
  budgetFromHeader,
  parseBudgetPolicyJson,
  parseRetryPolicyJson,
  type BudgetPolicyOverrides,
  type RetryPolicyOverrides,
  ERROR,
  type CodeOf,
} from '@reach/core';

/**
 * Attempts, backoff and time budgets (R-D2, R-D3, R-D4), pure: whoever sees an attempt
 * fail (the dispatcher: ack timeout, agent reject) asks `decideAfterFailure` whether the message
 * gets another attempt and when, or dies and with which code; the router asks `budgetDeadlineAt`
 * and `ackDeadlineAt` for a delivery's deadlines; the retry-scheduler's stuck sweep asks
 * `budgetDeadlineAt` which messages are past their budget. One module, so the three agree.
 */

export interface RetryParams {
  /** Retries after the first attempt: at most 1 + maxRetries attempts. */
  readonly maxRetries: number;
  readonly baseMs: number;
  readonly maxMs: number;
}

export interface RetryPolicy {
  readonly defaults: RetryParams;
  readonly byType: RetryPolicyOverrides;
}

export interface BudgetPolicy {
  /** The end-to-end budget of a type without an override. */
  readonly defaultMs: number;
  readonly byType: BudgetPolicyOverrides;
}

/** The retry policy from the service's options (REACH_RETRY_* and REACH_RETRY_POLICY). */
export function retryPolicyOf(cfg: { retryBaseMs: number; retryMaxMs: number; maxRetries: number; retryPolicy: string }): RetryPolicy {
  return { defaults: { maxRetries: cfg.maxRetries, baseMs: cfg.retryBaseMs, maxMs: cfg.retryMaxMs }, byType: parseRetryPolicyJson(cfg.retryPolicy) };
}

/** The budget policy from the service's options (REACH_BUDGET_MS and REACH_BUDGET_POLICY). */
export function budgetPolicyOf(cfg: { budgetMs: number; budgetPolicy: string }): BudgetPolicy {
  return { defaultMs: cfg.budgetMs, byType: parseBudgetPolicyJson(cfg.budgetPolicy) };
}

export function retryParamsFor(policy: RetryPolicy, messageType: string): RetryParams {
  const o = Object.hasOwn(policy.byType, messageType) ? policy.byType[messageType] : undefined;
  if (!o) return policy.defaults;
  return {
    maxRetries: o.max_retries ?? policy.defaults.maxRetries,
    baseMs: o.base_ms ?? policy.defaults.baseMs,
    maxMs: o.max_ms ?? policy.defaults.maxMs,
  };
}

export function budgetMsFor(policy: BudgetPolicy, messageType: string): number {
  return Object.hasOwn(policy.byType, messageType) ? policy.byType[messageType]! : policy.defaultMs;
}

/**
 * R-D3: `min(base·2^attempt, max)·(0.8 + rand·0.4)`, where `attempt` is the attempt that
 * failed (0 for the first): 200, 400, 800 ms … capped at 4 s, each ±20 %.
 */
export function backoffMs(attempt: number, params: Pick<RetryParams, 'baseMs' | 'maxMs'>, rand: number = Math.random()): number {
  const exp = Math.min(params.baseMs * 2 ** Math.max(0, attempt), params.maxMs);
  return Math.round(exp * (0.8 + Math.min(1, Math.max(0, rand)) * 0.4));
}

/** Where a message's budget starts: its replay (BUDGET_FROM_HEADER), else its created_at. */
export function budgetStartOf(env: { created_at: number; headers?: Readonly<Record<string, string>> | undefined }): number {
  const from = budgetFromHeader(env.headers?.[BUDGET_FROM_HEADER]);
  return from !== undefined && from > env.created_at ? from : env.created_at;
}

/**
 * End of a message's whole budget: `min(budget start + budget(type), expire_at)`, the budget
 * start being created_at, or the replay time of a dead-letter replay (budgetStartOf).
 */
export function budgetDeadlineAt(
  env: { message_type: string; created_at: number; expire_at: number | null; headers?: Readonly<Record<string, string>> | undefined },
  policy: BudgetPolicy,
): number {
  const byBudget = budgetStartOf(env) + budgetMsFor(policy, env.message_type);
  return env.expire_at === null ? byBudget : Math.min(byBudget, env.expire_at);
}

/** Ack deadline of one attempt: `min(now + (timeout_ms ?? ack timeout), budget deadline)`. */
export function ackDeadlineAt(now: number, timeoutMs: number | null, ackTimeoutMs: number, budgetDeadline: number | null): number {
  const own = now + (timeoutMs ?? ackTimeoutMs);
  return budgetDeadline === null ? own : Math.min(own, budgetDeadline);
}

export interface FailedAttempt {
  /** The attempt that failed (0 = first). */
  readonly attempt: number;
  /** The envelope's `retryable` (set at the source, R-D4). */
  readonly envelopeRetryable: boolean;
  /** Whether this failure may be retried at all (an agent's `retryable: false` reject is not). */
  readonly failureRetryable: boolean;
  readonly messageType: string;
  readonly expireAt: number | null;
  /** End of the message's budget (see budgetDeadlineAt). */
  readonly budgetDeadline: number;
  readonly now: number;
}

export type FailureDecision =
  | { readonly kind: 'retry'; readonly notBefore: number; readonly delayMs: number; readonly nextAttempt: number }
  /** The agent refused for good: REJECTED 3003 (not DEAD: it was delivered and answered). */
  | { readonly kind: 'rejected'; readonly code: CodeOf<'AGENT_REJECTED'> }
  | { readonly kind: 'dead'; readonly code: CodeOf<'RETRIES_EXHAUSTED' | 'BUDGET_EXCEEDED' | 'EXPIRED'>; readonly why: string };

/**
 * What happens after an attempt failed. In order: an agent's non-retryable refusal is final
 * (REJECTED 3003); a message past its expire_at is EXPIRED (3006); a sender's `retryable:
 * false` or a spent attempt allowance is RETRIES_EXHAUSTED (3004); a retry whose backoff
 * would end at or after the budget deadline is BUDGET_EXCEEDED (3005); otherwise the retry
 * is due at now + backoff.
 */
export function decideAfterFailure(f: FailedAttempt, policy: RetryPolicy, rand: number = Math.random()): FailureDecision {
  if (!f.failureRetryable) return { kind: 'rejected', code: ERROR.AGENT_REJECTED };
  if (f.expireAt !== null && f.now >= f.expireAt) return { kind: 'dead', code: ERROR.EXPIRED, why: `expired at ${new Date(f.expireAt).toISOString()}` };
  const params = retryParamsFor(policy, f.messageType);
  if (!f.envelopeRetryable) return { kind: 'dead', code: ERROR.RETRIES_EXHAUSTED, why: 'the message is not retryable: its one attempt failed' };
  if (f.attempt >= params.maxRetries) return { kind: 'dead', code: ERROR.RETRIES_EXHAUSTED, why: `all ${params.maxRetries + 1} attempts failed` };
  const delayMs = backoffMs(f.attempt, params, rand);
  const notBefore = f.now + delayMs;
  // The end that comes first names the death: expire_at (3006) when it is what stops the next
  // attempt, else the time budget (3005).
  if (f.expireAt !== null && notBefore >= f.expireAt && f.expireAt <= f.budgetDeadline)
    return { kind: 'dead', code: ERROR.EXPIRED, why: `it expires at ${new Date(f.expireAt).toISOString()}, before the next attempt could start` };
  if (notBefore >= f.budgetDeadline)
    return {
      kind: 'dead',
      code: ERROR.BUDGET_EXCEEDED,
      why: `the budget ends at ${new Date(f.budgetDeadline).toISOString()}, before the next attempt could start`,
    };
  return { kind: 'retry', notBefore, delayMs, nextAttempt: f.attempt + 1 };
}
