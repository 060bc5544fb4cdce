import type { BenchReport, StepResult } from './results.js';
import { isNoisyIdle } from './cpu-cost.js';
import { byComponentOrder, CLK_TCK } from './proc-cpu.js';
import { nearestRate } from './verdict.js';

/**
 * `--compare`: today's figures next to the committed baseline (bench/baseline.json, the JSON
 * of an earlier run), as today ÷ baseline. Both reports are flattened into named figures, each
 * knowing which way is better, so the ratio table says at a glance what moved and where.
 */

export interface Figure {
  key: string;
  value: number;
  /** Which way is an improvement. */
  better: 'lower' | 'higher';
  /** A difference this small is noise whatever the ratio (10 ms CPU ticks, 1 ms clock). */
  floor?: number;
}

/** Noise floors by unit: a 0.5 → 0.6 % idle core is one clock tick, not a regression. */
const FLOOR = { ms: 2, pctCore: 0.5, usPerMsg: 20, mib: 5, share: 0.01, ratio: 0.1 };
/** Two 10 ms CPU ticks spread over the window's messages: at 50 msg/s that is ~40 µs a message. */
const tickFloorUs = (messages: number) => Math.max(FLOOR.usPerMsg, messages > 0 ? (2 * 1e6) / CLK_TCK / messages : Infinity);

export interface ComparedFigure {
  key: string;
  baseline: number;
  today: number;
  /** today ÷ baseline */
  ratio: number;
  /** Moved more than `tolerance` in the good or bad direction, or about the same. */
  change: 'better' | 'worse' | 'same' | 'n/a';
}

function stepFigures(s: StepResult): Figure[] {
  const at = `sweep ${s.rate}/s`;
  const f = (key: string, value: number, floor: number, better: Figure['better'] = 'lower'): Figure => ({ key: `${at} ${key}`, value, better, floor });
  const out = [
    f('delivered share', s.offered > 0 ? s.delivered / s.offered : NaN, FLOOR.share, 'higher'),
    f('receive p50 ms', s.receive.p50, FLOOR.ms),
    f('receive p99 ms', s.receive.p99, FLOOR.ms),
    f('DELIVERED p50 ms', s.deliveredLatency.p50, FLOOR.ms),
    f('DELIVERED p95 ms', s.deliveredLatency.p95, FLOOR.ms),
    f('DELIVERED p99 ms', s.deliveredLatency.p99, FLOOR.ms),
    f('raw p99 ms', s.raw.p99, FLOOR.ms),
    // The stages commit every second: a second of traffic per group comes and goes with the timers.
    f('lag at end', s.lag.atEnd.total, Math.max(100, s.rate)),
    f('CPU µs/msg total', s.cpu.totalUsPerMsg, tickFloorUs(s.cpu.messages)),
    f('bench µs/msg', s.cpu.bench.usPerMsg, tickFloorUs(s.cpu.messages)),
  ];
  if (s.work) {
    const sum = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);
    const w = s.work;
    out.push(
      f('Kafka records produced / msg', sum(w.produced), 0.05),
      f(
        'Kafka requests / msg',
        Object.values(w.requests).reduce((a, r) => a + sum(r), 0),
        0.01,
      ),
      f('Redis commands / msg', sum(w.redis), 0.5),
      f('PostgreSQL rows written / msg', (w.pg.inserted ?? 0) + (w.pg.updated ?? 0) + (w.pg.deleted ?? 0), 0.1),
      f('log lines / msg', sum(w.logLines), 0.01),
    );
  }
  // A component busier idle than loaded has no trustworthy figure that run (n/a, not "better").
  for (const c of Object.keys(s.cpu.components).sort(byComponentOrder)) {
    const cost = s.cpu.components[c]!;
    out.push(f(`CPU µs/msg ${c}`, isNoisyIdle(cost) ? NaN : cost.usPerMsg, tickFloorUs(s.cpu.messages)));
  }
  return out;
}

/** Every figure of a report, by a name that is stable across runs. */
export function figures(r: BenchReport): Figure[] {
  const out: Figure[] = [];
  if (r.sweep) {
    const sw = r.sweep;
    for (const s of sw.steps) if (s.role === 'sweep') out.push(...stepFigures(s));
    out.push({ key: 'max sustainable rate msg/s', value: sw.maxSustainableRate ?? NaN, better: 'higher' });
    if (sw.knee) out.push({ key: 'knee ratio (p99 at 60 % ÷ p99 at 10 %)', value: sw.knee.ratio, better: 'lower' });
    if (sw.hops)
      for (const h of sw.hops.hops)
        out.push({ key: `hop ${h.hop} p50 ms`, value: h.p50, better: 'lower' }, { key: `hop ${h.hop} p99 ms`, value: h.p99, better: 'lower' });
    const rssRate = nearestRate(sw.steps.filter((s) => s.role === 'sweep').map((s) => s.rate));
    const rssStep = sw.steps.find((s) => s.role === 'sweep' && s.rate === rssRate);
    if (rssStep)
      for (const [c, mib] of Object.entries(rssStep.rssMiB).sort(([a], [b]) => byComponentOrder(a, b)))
        out.push({ key: `RSS MiB ${c}`, value: mib, better: 'lower', floor: FLOOR.mib });
  }
  if (r.idle) {
    out.push({ key: 'idle % core total', value: r.idle.totalPctCore, better: 'lower', floor: FLOOR.pctCore });
    for (const [c, pct] of Object.entries(r.idle.components).sort(([a], [b]) => byComponentOrder(a, b)))
      out.push({ key: `idle % core ${c}`, value: pct, better: 'lower', floor: FLOOR.pctCore });
  }
  if (r.idleAgents) {
    const a = r.idleAgents;
    out.push({ key: `${a.agents} idle agents: added % core dispatcher+registry`, value: a.addedDispatcherRegistry, better: 'lower', floor: FLOOR.pctCore });
    out.push({ key: `${a.agents} idle agents: added % core total`, value: a.addedTotal, better: 'lower', floor: FLOOR.pctCore });
  }
  if (r.single) {
    out.push({ key: 'one message at idle: DELIVERED p50 ms', value: r.single.delivered.p50, better: 'lower', floor: FLOOR.ms });
    out.push({ key: 'one message at idle: DELIVERED p99 ms', value: r.single.delivered.p99, better: 'lower', floor: FLOOR.ms });
  }
  if (r.tracker) {
    out.push({ key: 'tracker ceiling rows/s', value: r.tracker.rowsPerS, better: 'higher' });
    out.push({ key: 'tracker ceiling events/s', value: r.tracker.eventsPerS, better: 'higher' });
  }
  return out;
}

/** Today's figures that the baseline also has, with their ratio. `tolerance`: 0.1 = ±10 % counts as the same. */
export function compareReports(baseline: BenchReport, today: BenchReport, tolerance = 0.1): ComparedFigure[] {
  const base = new Map(figures(baseline).map((f) => [f.key, f]));
  const out: ComparedFigure[] = [];
  for (const t of figures(today)) {
    const b = base.get(t.key);
    if (!b) continue;
    const ok = Number.isFinite(b.value) && Number.isFinite(t.value);
    const ratio = ok && b.value !== 0 ? t.value / b.value : ok && t.value === 0 ? 1 : NaN;
    let change: ComparedFigure['change'] = 'n/a';
    if (ok && Math.abs(t.value - b.value) <= (t.floor ?? 0)) change = 'same';
    else if (Number.isFinite(ratio)) {
      const improved = t.better === 'lower' ? ratio < 1 - tolerance : ratio > 1 + tolerance;
      const regressed = t.better === 'lower' ? ratio > 1 + tolerance : ratio < 1 - tolerance;
      change = improved ? 'better' : regressed ? 'worse' : 'same';
    }
    out.push({ key: t.key, baseline: b.value, today: t.value, ratio, change });
  }
  return out;
}

/**
 * The baseline after saving today's run into it: each section today measured replaces the
 * baseline's, the others stay (a baseline is built by several short runs: sweep, idle, tracker).
 */
export function mergeBaseline(baseline: BenchReport | undefined, today: BenchReport): BenchReport {
  if (!baseline) return today;
  const merged: BenchReport = { ...baseline, at: today.at, host: today.host, settings: { ...baseline.settings, ...today.settings } };
  for (const k of ['sweep', 'idle', 'idleAgents', 'single', 'tracker'] as const) if (today[k]) Object.assign(merged, { [k]: today[k] });
  return merged;
}

/**
 * The sections fit to become a baseline: not one measured while a component restarted or was
 * down (the run says so; its figures would make every later comparison look better or worse).
 */
export function trustedSections(r: BenchReport): { trusted: BenchReport; suspect: Array<[section: string, why: string]> } {
  const why = (x: { churned?: string[]; absent?: string[] }) =>
    [x.churned?.length ? `restarted: ${x.churned.join(', ')}` : '', x.absent?.length ? `not running: ${x.absent.join(', ')}` : ''].filter(Boolean).join('; ');
  const reasons = {
    idle: r.idle ? why(r.idle) : '',
    idleAgents: r.idleAgents ? why(r.idleAgents) : '',
    sweep: r.sweep ? why({ churned: [...new Set(r.sweep.steps.flatMap((s) => s.cpu.churned))] }) : '',
  };
  const trusted: BenchReport = { ...r, settings: { ...r.settings } };
  const suspect: Array<[string, string]> = [];
  for (const [k, reason] of Object.entries(reasons) as Array<[keyof typeof reasons, string]>) {
    if (!reason) continue;
    suspect.push([k, reason]);
    delete trusted[k];
    delete trusted.settings[k];
  }
  return { trusted, suspect };
}
