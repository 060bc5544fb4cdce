import type { LoadReport } from './types.js';

/**
 * The node's real load for heartbeats (R-A5): handler outcomes of the last five minutes
 * (the window R-B3 scores health over), bounded to the newest `maxSamples`.
 */
export interface LoadTrackerOptions {
  /** Default 5 min. */
  windowMs?: number;
  /** Default 1000 outcomes. */
  maxSamples?: number;
  now?: () => number;
}

/**
 * Health is judged as if the agent had already succeeded this many times: one failure is not
 * evidence that an agent is broken. Reported as the raw ratio, the first transient failure of
 * a fresh agent read health 0; the registry put it in COOLDOWN and every sender got 2001 until
 * the next heartbeat (CI, 7 December: a Python agent failing its first message of 300). With
 * ten, one failure of one reads 0.909 and 5 % of a hundred 0.955; an agent failing everything
 * falls under the default COOLDOWN threshold after about twenty failures (10 / 30 = 0.33, times
 * its latency score), the same order of evidence the circuit wants before it opens (10 outcomes).
 */
export const HEALTH_PRIOR_SUCCESSES = 10;

interface Sample {
  at: number;
  ok: boolean;
  durationMs: number;
}

export class LoadTracker {
  private samples: Sample[] = [];
  private readonly windowMs: number;
  private readonly maxSamples: number;
  private readonly now: () => number;

  constructor(options: LoadTrackerOptions = {}) {
    this.windowMs = options.windowMs ?? 5 * 60_000;
    this.maxSamples = options.maxSamples ?? 1000;
    this.now = options.now ?? Date.now;
  }

  record(ok: boolean, durationMs: number): void {
    this.samples.push({ at: this.now(), ok, durationMs });
    if (this.samples.length > this.maxSamples) this.samples.splice(0, this.samples.length - this.maxSamples);
  }

  snapshot(running: number, queued: number): LoadReport {
    const since = this.now() - this.windowMs;
    const firstFresh = this.samples.findIndex((s) => s.at >= since);
    this.samples = firstFresh < 0 ? [] : this.samples.slice(firstFresh);
    const n = this.samples.length;
    const ok = this.samples.filter((s) => s.ok).length;
    const total = this.samples.reduce((sum, s) => sum + s.durationMs, 0);
    return {
      current_load: running,
      queue_length: queued,
      avg_latency_ms: n === 0 ? 0 : Math.round((total / n) * 10) / 10,
      // No recent work is no evidence of trouble: a fresh agent reports full health.
      health: Math.round(((ok + HEALTH_PRIOR_SUCCESSES) / (n + HEALTH_PRIOR_SUCCESSES)) * 1000) / 1000,
    };
  }
}
