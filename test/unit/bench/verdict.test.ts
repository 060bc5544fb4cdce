import { describe, expect, it } from 'vitest';
import {
  collapsed,
  kneeRates,
  kneeRatio,
  lagGrowthPerS,
  lagIsFlat,
  maxSustainableRate,
  nearestRate,
  verdict,
  type VerdictInput,
} from '../../../packages/bench/src/verdict.js';

const latency = (p99: number) => ({ count: 100, p50: p99 / 4, p95: p99 / 2, p99, max: p99 * 2 });
const step = (o: Partial<VerdictInput> = {}): VerdictInput => ({
  rate: 1000,
  durationS: 10,
  offered: 10_000,
  delivered: 10_000,
  deliveredLatency: latency(40),
  lag: { growthPerS: 0 },
  ...o,
});

describe('a sweep step is sustainable', () => {
  it('with DELIVERED p99 under 100 ms, everything delivered and flat lag', () => {
    expect(verdict(step())).toEqual({ sustainable: true, reasons: [] });
  });

  it('not with p99 at or over 100 ms, anything undelivered, or lag growing by a second of traffic', () => {
    expect(verdict(step({ deliveredLatency: latency(100) })).reasons).toEqual(['DELIVERED p99 100 ms ≥ 100 ms']);
    expect(verdict(step({ delivered: 9_999 })).reasons).toEqual(['1 of 10000 not delivered']);
    // 100 records/s over 10 s = 1,000 records = one second of traffic at 1,000 msg/s
    expect(verdict(step({ lag: { growthPerS: 100 } })).sustainable).toBe(false);
    expect(verdict(step({ lag: { growthPerS: 99 } })).sustainable).toBe(true);
  });

  it('not when nothing was offered or measured (no p99 at all)', () => {
    const v = verdict(step({ offered: 0, delivered: 0, deliveredLatency: { count: 0, p50: NaN, p95: NaN, p99: NaN, max: NaN } }));
    expect(v.sustainable).toBe(false);
    expect(v.reasons[0]).toContain('—');
  });
});

describe('lag growth', () => {
  it('is the least-squares slope in records per second, so a commit-timer sawtooth averages out', () => {
    const flat = Array.from({ length: 10 }, (_, i) => ({ atMs: i * 1000, lag: i % 2 === 0 ? 0 : 900 }));
    expect(Math.abs(lagGrowthPerS(flat))).toBeLessThan(100);
    const growing = Array.from({ length: 10 }, (_, i) => ({ atMs: i * 1000, lag: 500 * i }));
    expect(lagGrowthPerS(growing)).toBeCloseTo(500);
    expect(lagGrowthPerS([{ atMs: 0, lag: 5 }])).toBe(0);
    expect(lagIsFlat(500, 10, 1000)).toBe(false);
    expect(lagIsFlat(-300, 10, 1000)).toBe(true);
  });
});

describe('max sustainable rate and knee', () => {
  const s = (rate: number, sustainable: boolean, role: 'sweep' | 'knee' = 'sweep') => ({ rate, role, verdict: { sustainable, reasons: [] } });

  it('is the highest sustainable swept rate, even above a noisy failed one; knee steps never count', () => {
    expect(maxSustainableRate([s(50, true), s(250, false), s(1000, true), s(2000, false)])).toBe(1000);
    expect(maxSustainableRate([s(50, false), s(30, true, 'knee')])).toBeNull();
    expect(maxSustainableRate([])).toBeNull();
  });

  it('measures the knee at 60 % and 10 % of it, as p99 at 60 % ÷ p99 at 10 %', () => {
    expect(kneeRates(1000)).toEqual({ rate60: 600, rate10: 100 });
    expect(kneeRates(5)).toEqual({ rate60: 3, rate10: 1 });
    expect(kneeRatio(30, 10)).toBe(3);
    expect(kneeRatio(30, 0)).toBeNaN();
  });

  it('a step collapsed below 90 % delivered', () => {
    expect(collapsed(1000, 899)).toBe(true);
    expect(collapsed(1000, 900)).toBe(false);
    expect(collapsed(0, 0)).toBe(false);
  });

  it('takes the per-hop breakdown at the rate nearest 1,000 msg/s', () => {
    expect(nearestRate([50, 250, 1000, 2000])).toBe(1000);
    expect(nearestRate([50, 250, 3000])).toBe(250);
    expect(nearestRate([])).toBeUndefined();
  });
});
