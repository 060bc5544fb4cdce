import { describe, expect, it } from 'vitest';
import { compareReports, figures, mergeBaseline, trustedSections } from '../../../packages/bench/src/compare.js';
import type { BenchReport, StepResult } from '../../../packages/bench/src/results.js';

const lat = (p: number) => ({ count: 10, p50: p, p95: p * 2, p99: p * 3, max: p * 4 });
function step(rate: number, p: number, usPerMsg: number): StepResult {
  return {
    role: 'sweep',
    rate,
    durationS: 10,
    offered: rate * 10,
    received: rate * 10,
    redeliveries: 0,
    delivered: rate * 10,
    drainS: 0.1,
    collapsed: false,
    lag: { atEnd: { total: 10, byGroup: {} }, growthPerS: 0, afterDrain: 0 },
    receive: lat(p),
    deliveredLatency: lat(p),
    raw: { ...lat(1), sent: 10, received: 10, durationS: 5 },
    cpu: {
      windowS: 10,
      messages: rate * 10,
      components: { router: { usPerMsg, share: 1, loadedPctCore: 10, idlePctCore: 1 } },
      totalUsPerMsg: usPerMsg,
      stackMachineShare: 0.2,
      bench: { usPerMsg: 5, machineShare: 0.01 },
      churned: [],
      noisyIdle: [],
    },
    rssMiB: { router: 100 },
    processes: { router: 1 },
    verdict: { sustainable: true, reasons: [] },
  };
}
const report = (o: Partial<BenchReport>): BenchReport => ({ kind: 'reach-bench', version: 1, at: 'then', host: { cores: 2, node: 'v20' }, settings: {}, ...o });
const sweep = (steps: StepResult[], max: number | null) => ({
  rates: steps.map((s) => s.rate),
  steps,
  maxSustainableRate: max,
  knee: null,
  hops: null,
  skipped: [],
});

describe('bench --compare', () => {
  it('names figures the same way in every run, and knows which way is better', () => {
    const f = figures(report({ sweep: sweep([step(1000, 10, 400)], 1000) }));
    expect(f.find((x) => x.key === 'sweep 1000/s DELIVERED p99 ms')).toMatchObject({ key: 'sweep 1000/s DELIVERED p99 ms', value: 30, better: 'lower' });
    expect(f.find((x) => x.key === 'max sustainable rate msg/s')?.better).toBe('higher');
    expect(f.find((x) => x.key === 'RSS MiB router')?.value).toBe(100);
  });

  it('gives today ÷ baseline, better or worse beyond ±10 %, only for figures both have', () => {
    const base = report({ sweep: sweep([step(1000, 10, 400), step(50, 5, 900)], 1000), tracker: undefined });
    const today = report({
      sweep: sweep([step(1000, 20, 200), step(5000, 5, 100)], 5000),
      idle: { seconds: 30, processes: [], components: {}, totalPctCore: 10, churned: [], absent: [] },
    });
    const rows = new Map(compareReports(base, today).map((r) => [r.key, r]));
    expect(rows.get('sweep 1000/s DELIVERED p99 ms')).toMatchObject({ baseline: 30, today: 60, ratio: 2, change: 'worse' });
    expect(rows.get('sweep 1000/s CPU µs/msg total')).toMatchObject({ ratio: 0.5, change: 'better' });
    expect(rows.get('max sustainable rate msg/s')).toMatchObject({ ratio: 5, change: 'better' });
    expect(rows.get('sweep 1000/s delivered share')).toMatchObject({ ratio: 1, change: 'same' });
    expect([...rows.keys()].some((k) => k.startsWith('sweep 5000/s') || k.startsWith('sweep 50/s') || k.startsWith('idle'))).toBe(false);
  });

  it('calls a difference within the noise floor the same, whatever the ratio', () => {
    const idle = (kafka: number) => ({ seconds: 10, processes: [], components: { kafka }, totalPctCore: kafka, churned: [], absent: [] });
    const rows = compareReports(report({ idle: idle(0.5) }), report({ idle: idle(0.6) }));
    expect(rows.find((r) => r.key === 'idle % core kafka')).toMatchObject({ ratio: 1.2, change: 'same' });
    expect(compareReports(report({ idle: idle(5) }), report({ idle: idle(7) })).find((r) => r.key === 'idle % core kafka')?.change).toBe('worse');
  });

  it('says n/a where a figure was not measured (NaN, or null once read back from JSON)', () => {
    const none = step(1000, 10, 400);
    none.deliveredLatency = JSON.parse(JSON.stringify({ count: 0, p50: NaN, p95: NaN, p99: NaN, max: NaN })) as StepResult['deliveredLatency'];
    const rows = compareReports(report({ sweep: sweep([step(1000, 10, 400)], null) }), report({ sweep: sweep([none], null) }));
    expect(rows.find((r) => r.key === 'sweep 1000/s DELIVERED p99 ms')?.change).toBe('n/a');
    expect(rows.find((r) => r.key === 'max sustainable rate msg/s')?.change).toBe('n/a');
  });

  it('saving a baseline replaces the sections this run measured and keeps the others', () => {
    const idle = { seconds: 30, processes: [], components: { kafka: 5 }, totalPctCore: 5, churned: [], absent: [] };
    const base = report({ idle, sweep: sweep([step(1000, 10, 400)], 1000), settings: { idle: { seconds: 30 }, sweep: { rates: [1000] } } });
    const today = report({ at: 'now', sweep: sweep([step(250, 10, 400)], 250), settings: { sweep: { rates: [250] } } });
    const merged = mergeBaseline(base, today);
    expect(merged.idle).toBe(idle);
    expect(merged.sweep?.rates).toEqual([250]);
    expect(merged.settings).toEqual({ idle: { seconds: 30 }, sweep: { rates: [250] } });
    expect(merged.at).toBe('now');
    expect(mergeBaseline(undefined, today)).toBe(today);
  });

  it('never saves a section measured while a component restarted or was down', () => {
    const idle = { seconds: 10, processes: [], components: {}, totalPctCore: 100, churned: ['router'], absent: ['ingress'] };
    const { trusted, suspect } = trustedSections(report({ idle, sweep: sweep([step(1000, 10, 400)], 1000), settings: { idle: {}, sweep: {} } }));
    expect(suspect).toEqual([['idle', 'restarted: router; not running: ingress']]);
    expect(trusted.idle).toBeUndefined();
    expect(trusted.settings).toEqual({ sweep: {} });
    expect(trusted.sweep).toBeDefined();
  });
});

describe('--single in the comparison', () => {
  const single = (p50: number, p99: number) => ({
    messages: 100,
    delivered: { count: 100, p50, p95: p99, p99, max: p99 },
    roundTrip: { count: 100, p50: 40, p95: 60, p99: 80, max: 90 },
    hopsP50: { 'PENDING → ROUTED': 3 },
    notDelivered: 0,
  });
  const report = (p50: number, p99: number): BenchReport => ({
    kind: 'reach-bench',
    version: 1,
    at: '2026-12-07T19:00:00Z',
    host: { cores: 2, node: 'v24' },
    settings: { single: { messages: 100 } },
    single: single(p50, p99),
  });

  it('compares one message at idle, p50 and p99, lower is better', () => {
    const compared = compareReports(report(14, 37), report(7, 15));
    expect(compared.map((c) => [c.key, c.change])).toEqual([
      ['one message at idle: DELIVERED p50 ms', 'better'],
      ['one message at idle: DELIVERED p99 ms', 'better'],
    ]);
  });

  it('is saved into the baseline like the other sections', () => {
    expect(mergeBaseline(report(14, 37), report(7, 15)).single?.delivered.p50).toBe(7);
  });
});
