import { ReachError } from '@reach/core';

/** Message states after which no result will come (a retry would start a new attempt at PENDING). */
const FAILED_STATES = new Set(['REJECTED', 'DEAD']);

export interface SettleView {
  readonly status: string;
  readonly result: unknown;
  readonly agent_id: string | null;
}

/** Parses `?wait_ms=`: absent → undefined; a non-negative integer, else 4101 (HTTP 400). */
export function parseWaitMs(raw: string | null): number | undefined {
  if (raw === null || raw === '') return undefined;
  if (!/^\d{1,9}$/.test(raw)) {
    throw new ReachError('INVALID_ENVELOPE', 'wait_ms must be a non-negative integer (milliseconds)', { details: { field: 'wait_ms' } });
  }
  return Number(raw);
}

/** How long a request may wait for the result: ≤ the message's timeout_ms, ≤ REACH_MAX_WAIT_MS. */
export function effectiveWaitMs(requested: number, timeoutMs: number | null | undefined, maxWaitMs: number): number {
  return Math.max(0, Math.min(requested, timeoutMs ?? Number.POSITIVE_INFINITY, maxWaitMs));
}

/**
 * A fan-out parent (a topic publish, or a capability under a broadcast rule) that the router
 * has fanned out: DELIVERED by the router with no agent, since its deliveries are its copies,
 * each tracked under its own id (docs/pipeline.md). Every other DELIVERED names the agent that
 * acked it. No result will ever come to the parent itself.
 */
export function isFannedOut(view: SettleView | undefined): boolean {
  return view !== undefined && view.status === 'DELIVERED' && view.agent_id === null && (view.result === null || view.result === undefined);
}

/** A wait ends when the handler's result is recorded, the message failed for good, or it was fanned out. */
export function isSettled(view: SettleView | undefined): boolean {
  if (!view) return false;
  return (view.result !== null && view.result !== undefined) || FAILED_STATES.has(view.status) || isFannedOut(view);
}

export interface PollBackoff {
  readonly firstMs: number;
  readonly factor: number;
  readonly maxMs: number;
}

/** Short at first (results of fast handlers show up within tens of ms), growing to a cap. */
export const DEFAULT_POLL_BACKOFF: PollBackoff = { firstMs: 20, factor: 1.5, maxMs: 500 };

export function nextPollDelay(previousMs: number | undefined, backoff: PollBackoff = DEFAULT_POLL_BACKOFF): number {
  if (previousMs === undefined) return backoff.firstMs;
  return Math.min(Math.ceil(previousMs * backoff.factor), backoff.maxMs);
}
