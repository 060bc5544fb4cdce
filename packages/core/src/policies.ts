/**
 * Per-message_type overrides of the retry and budget options (R-D2, R-D3), given as JSON
 * in REACH_RETRY_POLICY and REACH_BUDGET_POLICY. Parsed here, at config load, so a bad value
 * stops the service at start (exit 78) with a message naming the variable and the field.
 */

/** `{"task_request":{"max_retries":5,"base_ms":500,"max_ms":8000}}`: any subset per type. */
export interface RetryOverride {
  readonly max_retries?: number;
  readonly base_ms?: number;
  readonly max_ms?: number;
}

export type RetryPolicyOverrides = Readonly<Record<string, RetryOverride>>;

/** `{"task_request":30000,"health_check":5000}`: end-to-end budget in ms per message_type. */
export type BudgetPolicyOverrides = Readonly<Record<string, number>>;

const RETRY_FIELDS: Record<keyof RetryOverride, { min: number; max: number }> = {
  max_retries: { min: 0, max: 100 },
  base_ms: { min: 1, max: 3_600_000 },
  max_ms: { min: 1, max: 3_600_000 },
};

function object(raw: string, what: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    throw new Error(`${what} is not valid JSON`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error(`${what} must be a JSON object keyed by message_type`);
  return v as Record<string, unknown>;
}

function intIn(v: unknown, path: string, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw new Error(`${path} must be an integer in [${min}, ${max}]`);
  return v;
}

/** Parses REACH_RETRY_POLICY; throws an Error naming the offending field. */
export function parseRetryPolicyJson(raw: string): RetryPolicyOverrides {
  const out: Record<string, RetryOverride> = {};
  for (const [type, v] of Object.entries(object(raw, 'the retry policy'))) {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error(`${type} must be an object like {"max_retries":5,"base_ms":500}`);
    const o: Record<string, number> = {};
    for (const [field, value] of Object.entries(v as Record<string, unknown>)) {
      const range = RETRY_FIELDS[field as keyof RetryOverride];
      if (!range) throw new Error(`${type}.${field} is not a retry setting (max_retries, base_ms, max_ms)`);
      o[field] = intIn(value, `${type}.${field}`, range.min, range.max);
    }
    out[type] = o;
  }
  return out;
}

/** Parses REACH_BUDGET_POLICY; throws an Error naming the offending field. */
export function parseBudgetPolicyJson(raw: string): BudgetPolicyOverrides {
  const out: Record<string, number> = {};
  for (const [type, v] of Object.entries(object(raw, 'the budget policy'))) out[type] = intIn(v, type, 100, 86_400_000);
  return out;
}
