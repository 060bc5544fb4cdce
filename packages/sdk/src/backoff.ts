import { AGENT_RECONNECT_BACKOFF } from '@reach/core';

/** Reconnect backoff of R-G1 (AGENT_RECONNECT_BACKOFF: 1 s doubling to 32 s, plus up to 20 % jitter). */
export interface BackoffOptions {
  /** First delay. Default 1000 ms. */
  baseMs?: number;
  /** Largest delay before jitter. Default 32000 ms. */
  maxMs?: number;
  /** Extra random fraction added on top, 0…jitter. Default 0.2. */
  jitter?: number;
}

export const RECONNECT_BACKOFF: Required<BackoffOptions> = { ...AGENT_RECONNECT_BACKOFF };

/** Delay before reconnect attempt `attempt` (0 = the first retry after a drop). */
export function reconnectDelayMs(attempt: number, random: () => number = Math.random, options: BackoffOptions = {}): number {
  const { baseMs, maxMs, jitter } = { ...RECONNECT_BACKOFF, ...options };
  // 2 ** 30 already dwarfs any sane maximum; capping the exponent keeps the number finite.
  const plain = Math.min(baseMs * 2 ** Math.min(Math.max(attempt, 0), 30), maxMs);
  return Math.round(plain * (1 + random() * jitter));
}
