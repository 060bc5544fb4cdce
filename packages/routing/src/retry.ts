import { ATTEMPT_HEADER, EXCLUDE_HEADER, TRACEPARENT_HEADER } from '@reach/core';
import type { RetryRequest } from '@reach/envelope';

/**
 * The reasons of a RetryRequest that holds a message: every candidate saturated (R-B7), or
 * the only agent that could take it reconnecting within its grace. A hold is not a failed
 * attempt — nothing was delivered — so the same attempt is routed again when it is due; every
 * other RetryRequest names the attempt that failed, and the retry is the next one.
 */
export const HOLD_REASON_SATURATED = 'SATURATED';
export const HOLD_REASON_RECONNECTING = 'RECONNECTING';

export function isHold(req: Pick<RetryRequest, 'reason'>): boolean {
  return req.reason === HOLD_REASON_SATURATED || req.reason === HOLD_REASON_RECONNECTING;
}

/** The attempt number the message carries when it is re-published to reach.pending.v1. */
export function republishAttempt(req: Pick<RetryRequest, 'attempt' | 'reason'>): number {
  return isHold(req) ? req.attempt : req.attempt + 1;
}

/** Kafka headers of the re-published record: attempt, failover exclusions, trace context. */
export function republishHeaders(req: Pick<RetryRequest, 'attempt' | 'reason' | 'exclude_agent_ids'>, traceparent: string | undefined): Record<string, string> {
  const headers: Record<string, string> = { [ATTEMPT_HEADER]: String(republishAttempt(req)) };
  const exclude = [...new Set(req.exclude_agent_ids)];
  if (exclude.length > 0) headers[EXCLUDE_HEADER] = exclude.join(',');
  if (traceparent) headers[TRACEPARENT_HEADER] = traceparent;
  return headers;
}
