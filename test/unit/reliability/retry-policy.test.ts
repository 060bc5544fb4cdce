import { describe, expect, it } from 'vitest';
import { loadConfig, parseBudgetPolicyJson, parseRetryPolicyJson } from '@reach/core';
import {
  ackDeadlineAt,
  backoffMs,
  budgetDeadlineAt,
  budgetPolicyOf,
  budgetStartOf,
  decideAfterFailure,
  retryParamsFor,
  retryPolicyOf,
  type FailedAttempt,
} from '@reach/routing';

const policy = retryPolicyOf({ retryBaseMs: 200, retryMaxMs: 4000, maxRetries: 3, retryPolicy: '{"task_request":{"max_retries":5,"base_ms":500}}' });
const budget = budgetPolicyOf({ budgetMs: 45000, budgetPolicy: '{"task_request":30000,"health_check":5000}' });

function failed(over: Partial<FailedAttempt> = {}): FailedAttempt {
  return { attempt: 0, envelopeRetryable: true, failureRetryable: true, messageType: 'event', expireAt: null, budgetDeadline: 1_000_000, now: 1000, ...over };
}

describe('backoff (R-D3)', () => {
  it('is min(base·2^attempt, max) scaled by 0.8 … 1.2', () => {
    const p = { baseMs: 200, maxMs: 4000 };
    expect([0, 1, 2, 3, 4, 5, 10].map((a) => backoffMs(a, p, 0.5))).toEqual([200, 400, 800, 1600, 3200, 4000, 4000]);
    expect(backoffMs(0, p, 0)).toBe(160);
    expect(backoffMs(0, p, 1)).toBe(240);
    expect(backoffMs(6, p, 0)).toBe(3200);
    expect(backoffMs(6, p, 1)).toBe(4800);
  });

  it('stays within ±20 % for any random draw', () => {
    for (let i = 0; i < 1000; i++) {
      const d = backoffMs(2, { baseMs: 200, maxMs: 4000 });
      expect(d).toBeGreaterThanOrEqual(640);
      expect(d).toBeLessThanOrEqual(960);
    }
  });
});

describe('policies per message_type', () => {
  it('overrides only what the type names', () => {
    expect(retryParamsFor(policy, 'task_request')).toEqual({ maxRetries: 5, baseMs: 500, maxMs: 4000 });
    expect(retryParamsFor(policy, 'event')).toEqual({ maxRetries: 3, baseMs: 200, maxMs: 4000 });
    expect(retryParamsFor(policy, 'constructor')).toEqual({ maxRetries: 3, baseMs: 200, maxMs: 4000 });
  });

  it('refuses bad JSON, unknown fields and out-of-range values, naming the field', () => {
    expect(() => parseRetryPolicyJson('{')).toThrow(/not valid JSON/);
    expect(() => parseRetryPolicyJson('[]')).toThrow(/JSON object/);
    expect(() => parseRetryPolicyJson('{"task_request":{"retries":2}}')).toThrow(/task_request\.retries/);
    expect(() => parseRetryPolicyJson('{"task_request":{"max_retries":-1}}')).toThrow(/task_request\.max_retries/);
    expect(() => parseRetryPolicyJson('{"task_request":3}')).toThrow(/task_request/);
    expect(() => parseBudgetPolicyJson('{"health_check":"5s"}')).toThrow(/health_check/);
    expect(parseBudgetPolicyJson('{"health_check":5000}')).toEqual({ health_check: 5000 });
  });

  it('is validated at config load: a bad REACH_RETRY_POLICY names the variable', () => {
    expect(() => loadConfig(['retryPolicy'], { REACH_RETRY_POLICY: '{"x":{"base_ms":0}}' })).toThrow(/REACH_RETRY_POLICY.*x\.base_ms/s);
    expect(() => loadConfig(['budgetPolicy'], { REACH_BUDGET_POLICY: 'nope' })).toThrow(/REACH_BUDGET_POLICY/);
    const c = loadConfig(['retryBaseMs', 'retryMaxMs', 'maxRetries', 'budgetMs', 'budgetPolicy', 'stuckSweepMs'], {});
    expect(c).toMatchObject({ retryBaseMs: 200, retryMaxMs: 4000, maxRetries: 3, budgetMs: 45000, stuckSweepMs: 5000 });
    expect(budgetPolicyOf(c).byType).toEqual({ task_request: 30000, health_check: 5000 });
  });
});

describe('budget and deadlines (R-D2)', () => {
  it('ends at min(created_at + budget(type), expire_at)', () => {
    expect(budgetDeadlineAt({ message_type: 'event', created_at: 0, expire_at: null }, budget)).toBe(45000);
    expect(budgetDeadlineAt({ message_type: 'task_request', created_at: 0, expire_at: null }, budget)).toBe(30000);
    expect(budgetDeadlineAt({ message_type: 'health_check', created_at: 0, expire_at: 9000 }, budget)).toBe(5000);
    expect(budgetDeadlineAt({ message_type: 'event', created_at: 0, expire_at: 1000 }, budget)).toBe(1000);
  });

  it('a replay counts its budget from reach-budget-from (issue #25), never from before created_at, and expire_at still holds', () => {
    const replay = (from: string) => ({ message_type: 'task_request', created_at: 1000, expire_at: null, headers: { 'reach-budget-from': from } });
    expect(budgetStartOf(replay('500000'))).toBe(500000);
    expect(budgetDeadlineAt(replay('500000'), budget)).toBe(530000);
    // not a plausible time, or before created_at: created_at
    for (const bad of ['', 'soon', '-5', '1e9', '999']) expect(budgetStartOf(replay(bad))).toBe(1000);
    expect(budgetDeadlineAt({ ...replay('500000'), expire_at: 2000 }, budget)).toBe(2000);
  });

  it('an ack deadline never passes the budget', () => {
    expect(ackDeadlineAt(100, null, 10000, null)).toBe(10100);
    expect(ackDeadlineAt(100, 500, 10000, 50000)).toBe(600);
    expect(ackDeadlineAt(100, 500, 10000, 300)).toBe(300);
  });
});

describe('after a failed attempt', () => {
  it('retries with backoff until 1 + max_retries attempts, then RETRIES_EXHAUSTED', () => {
    for (let attempt = 0; attempt < 3; attempt++) {
      const d = decideAfterFailure(failed({ attempt }), policy, 0.5);
      expect(d).toEqual({ kind: 'retry', notBefore: 1000 + 200 * 2 ** attempt, delayMs: 200 * 2 ** attempt, nextAttempt: attempt + 1 });
    }
    expect(decideAfterFailure(failed({ attempt: 3 }), policy)).toMatchObject({ kind: 'dead', code: 3004 });
    expect(decideAfterFailure(failed({ attempt: 4, messageType: 'task_request' }), policy, 0.5)).toMatchObject({ kind: 'retry', delayMs: 4000 });
    expect(decideAfterFailure(failed({ attempt: 5, messageType: 'task_request' }), policy)).toMatchObject({ kind: 'dead', code: 3004 });
  });

  it('never retries a non-retryable message or refusal', () => {
    expect(decideAfterFailure(failed({ envelopeRetryable: false }), policy)).toMatchObject({ kind: 'dead', code: 3004 });
    expect(decideAfterFailure(failed({ failureRetryable: false }), policy)).toEqual({ kind: 'rejected', code: 3003 });
  });

  it('dies BUDGET_EXCEEDED when the retry could not start before the budget ends, EXPIRED when expire_at is what stops it', () => {
    expect(decideAfterFailure(failed({ budgetDeadline: 1200 }), policy, 0.5)).toMatchObject({ kind: 'dead', code: 3005 });
    expect(decideAfterFailure(failed({ budgetDeadline: 1201 }), policy, 0.5)).toMatchObject({ kind: 'retry' });
    expect(decideAfterFailure(failed({ expireAt: 1000, budgetDeadline: 1000 }), policy)).toMatchObject({ kind: 'dead', code: 3006 });
    // Not expired yet, but the retry could only start after expire_at, which ends the budget.
    expect(decideAfterFailure(failed({ expireAt: 1100, budgetDeadline: 1100 }), policy, 0.5)).toMatchObject({ kind: 'dead', code: 3006 });
    // The budget ends first: it names the death.
    expect(decideAfterFailure(failed({ expireAt: 5000, budgetDeadline: 1100 }), policy, 0.5)).toMatchObject({ kind: 'dead', code: 3005 });
    expect(decideAfterFailure(failed({ expireAt: 1150, budgetDeadline: 1100 }), policy, 0.5)).toMatchObject({ kind: 'dead', code: 3005 });
  });
});
