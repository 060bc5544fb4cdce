import type { ComparedFigure } from './compare.js';
import { byComponentOrder } from './proc-cpu.js';
import type { SingleResult } from './single.js';
import type { BenchReport, IdleAgentsResult, IdleResult, LatencySummary, StepResult, SweepResult, TrackerCeilingResult } from './results.js';
import { fmt } from './stats.js';
import { FLAT_LAG_S, nearestRate, P99_LIMIT_MS } from './verdict.js';

/** The human tables of every mode; `--json` prints the same figures as data instead. */

/** A line naming components that restarted or were missing during a window (old reports have neither field). */
function stackChanges(r: { churned?: string[]; absent?: string[] }): string {
  const parts = [
    r.churned?.length ? `restarted during the window: ${r.churned.join(', ')}` : '',
    r.absent?.length ? `not running: ${r.absent.join(', ')}` : '',
  ].filter(Boolean);
  return parts.length > 0 ? `(${parts.join('; ')} — figures suspect)\n` : '';
}

export type Row = Record<string, string | number>;

/** Left-aligned columns, two spaces apart, headed by the first row's keys. */
export function table(rows: readonly Row[]): string {
  if (rows.length === 0) return '(none)\n';
  const cols = Object.keys(rows[0]!);
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c] ?? '').length)));
  const line = (vals: string[]) =>
    vals
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(cols), ...rows.map((r) => line(cols.map((c) => String(r[c] ?? ''))))].join('\n') + '\n';
}

// Math.round first: toFixed(0) of -0.3 is "-0".
const int = (n: number) => fmt(Math.round(n) + 0, 0);
const pct = (share: number) => `${fmt(share * 100, share < 0.1 ? 1 : 0)} %`;
export const percentiles = (l: LatencySummary): string => [l.p50, l.p95, l.p99, l.max].map(int).join(' / ');

function stepRows(steps: readonly StepResult[]): Row[] {
  return steps.map((s) => ({
    'rate/s': s.role === 'knee' ? `${s.rate} (knee)` : s.rate,
    offered: s.offered,
    received: s.received,
    DELIVERED: s.delivered,
    redelivered: s.redeliveries,
    'lag end': s.lag.atEnd.total,
    'lag Δ/s': int(s.lag.growthPerS),
    'raw p50/p95/p99/max ms': percentiles(s.raw),
    'receive p50/p95/p99/max ms': percentiles(s.receive),
    'DELIVERED p50/p95/p99/max ms': percentiles(s.deliveredLatency),
    sustainable: s.verdict.sustainable ? 'yes' : `no: ${s.verdict.reasons.join('; ')}`,
  }));
}

function cpuRows(steps: readonly StepResult[]): Row[] {
  const head = (s: StepResult) => `${s.rate}/s${s.role === 'knee' ? ' (knee)' : ''}`;
  const components = [...new Set(steps.flatMap((s) => Object.keys(s.cpu.components)))].sort(byComponentOrder);
  const row = (name: string, cell: (s: StepResult) => string): Row => Object.fromEntries([['µs CPU / msg', name], ...steps.map((s) => [head(s), cell(s)])]);
  return [
    ...components.map((c) =>
      row(c, (s) => {
        const x = s.cpu.components[c];
        return x ? `${int(x.usPerMsg)} (${pct(x.share)})` : '—';
      }),
    ),
    row('stack total µs/msg', (s) => int(s.cpu.totalUsPerMsg)),
    row('stack, share of machine', (s) => pct(s.cpu.stackMachineShare)),
    row('bench (apart) µs/msg', (s) => int(s.cpu.bench.usPerMsg)),
    row('bench, share of machine', (s) => pct(s.cpu.bench.machineShare)),
  ];
}

const SHOWN_PER_MSG = 0.005;
const perMsg = (n: number) => (n >= 10 ? fmt(n, 1) : fmt(n, n >= 1 ? 2 : 3));
const total = (r: Record<string, number> | undefined) => Object.values(r ?? {}).reduce((a, b) => a + b, 0);

/** The work per DELIVERED message (work-count.ts), one row per thing counted and a column per step. */
export function workRows(steps: readonly StepResult[]): Row[] {
  const counted = steps.filter((s) => s.work);
  if (counted.length === 0) return [];
  const head = (s: StepResult) => `${s.rate}/s${s.role === 'knee' ? ' (knee)' : ''}`;
  const rows: Row[] = [];
  const add = (what: string, value: (w: NonNullable<StepResult['work']>) => number, always = false) => {
    const values = counted.map((s) => value(s.work!));
    if (!always && values.every((v) => v < SHOWN_PER_MSG)) return;
    rows.push(Object.fromEntries([['per DELIVERED message', what], ...counted.map((s, i) => [head(s), perMsg(values[i]!)])]));
  };
  const keys = (pick: (w: NonNullable<StepResult['work']>) => Record<string, number>) =>
    [...new Set(counted.flatMap((s) => Object.keys(pick(s.work!))))].sort();
  add('Kafka records produced', (w) => total(w.produced), true);
  for (const t of keys((w) => w.produced)) add(`  ${t}`, (w) => w.produced[t] ?? 0);
  add('Kafka records consumed', (w) => total(w.consumed), true);
  for (const g of keys((w) => w.consumed)) add(`  ${g}`, (w) => w.consumed[g] ?? 0);
  const services = [...new Set(counted.flatMap((s) => Object.keys(s.work!.requests)))].sort();
  add('Kafka requests', (w) => Object.values(w.requests).reduce((a, r) => a + total(r), 0), true);
  for (const svc of services) {
    for (const api of ['Produce', 'Fetch']) add(`  ${svc} ${api}`, (w) => w.requests[svc]?.[api] ?? 0);
    add(`  ${svc} other`, (w) => total(w.requests[svc]) - (w.requests[svc]?.Produce ?? 0) - (w.requests[svc]?.Fetch ?? 0));
  }
  add('Redis commands (those scripts run included)', (w) => total(w.redis), true);
  const weight = (c: string) => counted.reduce((a, s) => a + (s.work!.redis[c] ?? 0), 0);
  const commands = keys((w) => w.redis).sort((a, b) => weight(b) - weight(a));
  for (const c of commands.slice(0, 12)) add(`  ${c}`, (w) => w.redis[c] ?? 0);
  add('PostgreSQL statements', (w) => total(w.pgStatements), true);
  for (const svc of keys((w) => w.pgStatements)) add(`  ${svc}`, (w) => w.pgStatements[svc] ?? 0);
  add('PostgreSQL transactions', (w) => w.pg.xacts ?? 0, true);
  add('PostgreSQL rows inserted', (w) => w.pg.inserted ?? 0, true);
  add('PostgreSQL rows updated', (w) => w.pg.updated ?? 0, true);
  add('PostgreSQL rows deleted', (w) => w.pg.deleted ?? 0);
  add('log lines', (w) => total(w.logLines), true);
  for (const l of keys((w) => w.logLines)) add(`  ${l}`, (w) => w.logLines[l] ?? 0);
  return rows;
}

/** How a sweep was run, as its tables' headings say it (kept in the report's settings.sweep). */
export interface SweepHeading {
  durationS: number;
  warmupS: number;
  cpuIdleS: number;
  agents: number;
  payloadBytes: number;
  cores: number;
}

export function sweepReport(r: SweepResult, o: SweepHeading): string {
  const out: string[] = [];
  out.push(
    `\nreach bench --sweep ${r.rates.join(',')}: ${o.agents} agents, ${o.payloadBytes} B payloads; per step ${o.cpuIdleS} s idle CPU, ${o.warmupS} s warm-up, ` +
      `${o.durationS} s measured, then the raw kafkajs loop at the same rate\n\n`,
  );
  out.push(table(stepRows(r.steps)));
  if (r.skipped.length > 0) out.push(`(not run: ${r.skipped.join(', ')} msg/s — an earlier step collapsed; --keep-going runs them)\n`);
  out.push(`\nCPU per DELIVERED message, idle cost taken off (share of the stack's), ${o.cores} cores:\n\n`);
  out.push(table(cpuRows(r.steps)));
  const churned = [...new Set(r.steps.flatMap((s) => s.cpu.churned))];
  if (churned.length > 0) out.push(`(restarted during a window, figures suspect: ${churned.join(', ')})\n`);
  for (const s of r.steps.filter((x) => x.cpu.noisyIdle?.length)) {
    out.push(`(${s.rate}/s: busier idle than loaded — something else was running, figures too low: ${s.cpu.noisyIdle.join(', ')})\n`);
  }

  const work = workRows(r.steps);
  if (work.length > 0) {
    out.push(
      `\nWork per DELIVERED message over the same windows (Kafka end and committed offsets, kafkajs requests, Redis INFO commandstats, PostgreSQL pg_stat_database and statements sent, log lines):\n\n`,
    );
    out.push(table(work));
  }

  const groups = [...new Set(r.steps.flatMap((s) => Object.keys(s.lag.atEnd.byGroup)))].sort();
  if (groups.length > 0) {
    out.push(`\nConsumer lag at the end of each step's sends (end offset − committed; the stages commit every second):\n\n`);
    out.push(
      table(
        groups.map((g) =>
          Object.fromEntries([['group', g], ...r.steps.map((s) => [`${s.rate}/s${s.role === 'knee' ? ' (knee)' : ''}`, s.lag.atEnd.byGroup[g] ?? '—'])]),
        ),
      ),
    );
  }

  const rssRate = nearestRate(r.steps.filter((s) => s.role === 'sweep').map((s) => s.rate));
  const rssStep = r.steps.find((s) => s.role === 'sweep' && s.rate === rssRate);
  if (rssStep) {
    out.push(`\nRSS at the end of the ${rssStep.rate} msg/s step:\n\n`);
    const rows = Object.entries(rssStep.rssMiB)
      .sort(([a], [b]) => byComponentOrder(a, b))
      .map(([component, mib]) => ({ component, 'RSS MiB': int(mib), processes: rssStep.processes?.[component] ?? '' }));
    out.push(table(rows));
  }
  if (r.hops) {
    out.push(`\nPer hop at ${r.hops.rate} msg/s, from the timelines of ${r.hops.complete} of ${r.hops.sampled} sampled messages:\n\n`);
    out.push(table(r.hops.hops.map((h) => ({ hop: h.hop, n: h.count, 'p50 ms': int(h.p50), 'p99 ms': int(h.p99) }))));
  }
  out.push(
    `\nmax sustainable rate: ${r.maxSustainableRate === null ? 'none of the swept rates' : `${r.maxSustainableRate} msg/s`} ` +
      `(DELIVERED p99 < ${P99_LIMIT_MS} ms, everything delivered, lag growing by < ${FLAT_LAG_S} s of traffic over the step)\n`,
  );
  if (r.knee) {
    out.push(
      `knee ratio: p99 at ${r.knee.rate60} msg/s (60 %) ÷ p99 at ${r.knee.rate10} msg/s (10 %) = ${int(r.knee.p99At60)} / ${int(r.knee.p99At10)} ms = ${fmt(r.knee.ratio, 2)}\n`,
    );
  } else out.push('knee ratio: not measured (no sustainable rate, or --no-knee)\n');
  return out.join('');
}

export function idleReport(r: IdleResult): string {
  // PostgreSQL has a backend per pooled connection, most of them asleep: those are one line.
  const asleep = r.processes.filter((p) => p.component === 'postgres' && p.pctCore === 0);
  const rows: Row[] = r.processes
    .filter((p) => !asleep.includes(p))
    .map((p) => ({ component: p.component, pid: p.pid, '% of one core': fmt(p.pctCore, 2), process: p.label }));
  if (asleep.length > 0) rows.push({ component: 'postgres', pid: '', '% of one core': fmt(0, 2), process: `${asleep.length} more processes that used no CPU` });
  const components = Object.entries(r.components)
    .sort(([a], [b]) => byComponentOrder(a, b))
    .map(([component, v]) => ({ component, '% of one core': fmt(v, 2) }));
  return (
    `\nreach bench --idle: the stack's CPU with no traffic over ${fmt(r.seconds, 0)} s\n\n` +
    table(rows) +
    '\n' +
    table([...components, { component: 'total', '% of one core': fmt(r.totalPctCore, 2) }]) +
    stackChanges(r)
  );
}

export function singleReport(r: SingleResult): string {
  const row = (what: string, l: LatencySummary) => ({ '': what, p50: fmt(l.p50, 0), p95: fmt(l.p95, 0), p99: fmt(l.p99, 0), max: fmt(l.max, 0) });
  const hops = Object.entries(r.hopsP50).map(([hop, ms]) => ({ hop, 'p50 ms': fmt(ms, 0) }));
  return (
    `\nreach bench --single ${r.messages}: one message at a time on the idle stack (ms)${r.notDelivered > 0 ? `, ${r.notDelivered} not DELIVERED within 5 s` : ''}\n\n` +
    table([row('HTTP submit → DELIVERED (read model)', r.delivered), row('POST, then read until DELIVERED (client)', r.roundTrip)]) +
    '\n' +
    table(hops)
  );
}

export function idleAgentsReport(r: IdleAgentsResult): string {
  const components = [...new Set([...Object.keys(r.before), ...Object.keys(r.with)])].sort(byComponentOrder);
  const rows: Row[] = components.map((c) => ({
    component: c,
    'before % core': fmt(r.before[c] ?? 0, 2),
    [`with ${r.agents} agents`]: fmt(r.with[c] ?? 0, 2),
    'added % core': fmt(r.added[c] ?? 0, 2),
  }));
  return (
    `\nreach bench --idle-agents ${r.agents}: ${r.agents} idle agents connected (in ${fmt(r.connectS, 1)} s), answering pings; windows of ${r.seconds} s before and with them\n\n` +
    table(rows) +
    `\nadded by ${r.agents} idle agents: dispatcher + registry ${fmt(r.addedDispatcherRegistry, 2)} % of one core; whole stack ${fmt(r.addedTotal, 2)} %\n` +
    stackChanges(r)
  );
}

export function trackerReport(r: TrackerCeilingResult): string {
  const basis =
    r.basis === 'saturated'
      ? `over the ${fmt(r.saturatedS, 1)} s it had a backlog (its ceiling)`
      : 'from the first send: it was never behind for a second, so the producer was the limit (a lower bound)';
  return (
    `\nreach bench --tracker: ${r.events} pre-encoded status events of ${r.messages} messages replayed onto reach.status-batches.v1, 50 to a record as the stages pack them; ` +
    `progress read from the tracker's ${r.measuredBy}; rows/s and events/s ${basis}\n\n` +
    table([
      {
        messages: r.messages,
        events: r.events,
        'produced in s': fmt(r.produceS, 1),
        'written in s': fmt(r.seconds, 1),
        'peak backlog': r.peakBacklog,
        'rows/s': int(r.rowsPerS),
        'events/s': int(r.eventsPerS),
        'overall rows/s': int(r.overall.rowsPerS),
        'overall events/s': int(r.overall.eventsPerS),
        'tracker % core': fmt(r.trackerPctCore, 0),
        'postgres % core': fmt(r.postgresPctCore, 0),
        'read back DELIVERED': `${r.verified.delivered}/${r.verified.sampled}`,
      },
    ]) +
    (r.complete ? '' : '(the tracker had not written everything before the timeout)\n')
  );
}

export function compareReport(rows: readonly ComparedFigure[], baselineAt: string): string {
  if (rows.length === 0) return `\nno figure of this run is in the baseline (${baselineAt})\n`;
  const digits = (n: number) => (Math.abs(n) >= 100 ? 0 : Math.abs(n) >= 10 ? 1 : 2);
  const count = (c: ComparedFigure['change']) => rows.filter((r) => r.change === c).length;
  return (
    `\ntoday ÷ baseline (${baselineAt}): ${count('better')} better, ${count('worse')} worse, ${count('same')} the same (±10 %, or within the noise floor), ${count('n/a')} n/a\n\n` +
    table(
      rows.map((r) => ({
        figure: r.key,
        baseline: fmt(r.baseline, digits(r.baseline)),
        today: fmt(r.today, digits(r.today)),
        'today ÷ baseline': fmt(r.ratio, 2),
        change: r.change,
      })),
    )
  );
}

/** Every section of a report (a saved --json run read back with --from), in the order they run. */
export function fullReport(r: BenchReport): string {
  return [
    r.idle ? idleReport(r.idle) : '',
    r.idleAgents ? idleAgentsReport(r.idleAgents) : '',
    r.single ? singleReport(r.single) : '',
    r.sweep ? sweepReport(r.sweep, { cores: r.host.cores, ...(r.settings.sweep as unknown as Omit<SweepHeading, 'cores'>) }) : '',
    r.tracker ? trackerReport(r.tracker) : '',
  ].join('');
}

/**
 * JSON as the repository's Prettier writes it (the baseline is committed and the lint checks
 * it): two-space indent, arrays of plain values on one line when they fit in 160 columns.
 */
export function toJson(value: unknown): string {
  const text = JSON.stringify(value, null, 2);
  return (
    text.replace(
      /^( *)("[^"\n]*": )?\[\n((?: *(?:"(?:[^"\\\n]|\\.)*"|-?[\d.eE+-]+|true|false|null),?\n)+) *\]/gm,
      (whole, indent: string, key: string | undefined, items: string) => {
        const line = `${indent}${key ?? ''}[${items
          .split('\n')
          .filter(Boolean)
          .map((x) => x.trim().replace(/,$/, ''))
          .join(', ')}]`;
        return line.length <= 160 ? line : whole;
      },
    ) + '\n'
  );
}
