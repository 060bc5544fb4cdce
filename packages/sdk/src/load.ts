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
      health: n === 0 ? 1 : Math.round((ok / n) * 1000) / 1000,
    };
  }
}
