import type { StepResult } from './results.js';

/**
 * The sweep's judgements, pure so they are unit-tested: is a step sustainable, which is the
 * highest sustainable rate, where the knee ratio is measured, is the lag flat.
 */

/** The latency target of R-P1: DELIVERED p99 under 100 ms. */
export const P99_LIMIT_MS = 100;
/** Lag may grow by at most this many seconds of traffic over a step and still count as flat. */
export const FLAT_LAG_S = 1;
/** Below this share delivered within the bounded straggler wait, a step has collapsed. */
export const COLLAPSED_BELOW = 0.9;

/**
 * Least-squares slope (records per second) of the lag samples: a single pair of readings
 * would mostly measure the stages' 1 s commit timers, whose sawtooth averages out over a fit.
 */
export function lagGrowthPerS(samples: ReadonlyArray<{ atMs: number; lag: number }>): number {
  if (samples.length < 2) return 0;
  const n = samples.length;
  const mx = samples.reduce((a, s) => a + s.atMs, 0) / n;
  const my = samples.reduce((a, s) => a + s.lag, 0) / n;
  let num = 0;
  let den = 0;
  for (const s of samples) {
    num += (s.atMs - mx) * (s.lag - my);
    den += (s.atMs - mx) ** 2;
  }
  return den > 0 ? (num / den) * 1000 : 0;
}

/** Flat: over the whole step the backlog grew by less than FLAT_LAG_S seconds of traffic. */
export function lagIsFlat(growthPerS: number, durationS: number, rate: number): boolean {
  return growthPerS * durationS < rate * FLAT_LAG_S;
}

export type VerdictInput = Pick<StepResult, 'rate' | 'durationS' | 'offered' | 'delivered' | 'deliveredLatency'> & {
  lag: Pick<StepResult['lag'], 'growthPerS'>;
};

export function verdict(s: VerdictInput): StepResult['verdict'] {
  const reasons: string[] = [];
  const p99 = s.deliveredLatency.p99;
  if (!(p99 < P99_LIMIT_MS)) reasons.push(`DELIVERED p99 ${Number.isFinite(p99) ? Math.round(p99) : '—'} ms ≥ ${P99_LIMIT_MS} ms`);
  if (s.offered === 0 || s.delivered < s.offered) reasons.push(`${s.offered - s.delivered} of ${s.offered} not delivered`);
  if (!lagIsFlat(s.lag.growthPerS, s.durationS, s.rate)) reasons.push(`lag growing ${Math.round(s.lag.growthPerS)}/s`);
  return { sustainable: reasons.length === 0, reasons };
}

export function collapsed(offered: number, delivered: number): boolean {
  return offered > 0 && delivered < offered * COLLAPSED_BELOW;
}

/** The highest swept rate whose step is sustainable (knee steps are not candidates). */
export function maxSustainableRate(steps: ReadonlyArray<Pick<StepResult, 'role' | 'rate' | 'verdict'>>): number | null {
  const ok = steps.filter((s) => s.role === 'sweep' && s.verdict.sustainable).map((s) => s.rate);
  return ok.length > 0 ? Math.max(...ok) : null;
}

/** The two rates the knee ratio compares: 60 % and 10 % of the max sustainable rate. */
export function kneeRates(max: number): { rate60: number; rate10: number } {
  return { rate60: Math.max(1, Math.round(max * 0.6)), rate10: Math.max(1, Math.round(max * 0.1)) };
}

/** p99 at 60 % ÷ p99 at 10 %: ~1 when latency is flat up to the max, large when a knee comes early. */
export function kneeRatio(p99At60: number, p99At10: number): number {
  return p99At10 > 0 && Number.isFinite(p99At60) ? p99At60 / p99At10 : NaN;
}

/** The swept rate the per-hop breakdown and the RSS table are taken at: the one nearest 1,000 msg/s. */
export function nearestRate(rates: readonly number[], target = 1000): number | undefined {
  let best: number | undefined;
  for (const r of rates) if (best === undefined || Math.abs(r - target) < Math.abs(best - target)) best = r;
  return best;
}
