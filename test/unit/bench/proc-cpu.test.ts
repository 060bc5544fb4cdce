import { describe, expect, it } from 'vitest';
import { cpuCost } from '../../../packages/bench/src/cpu-cost.js';
import { componentOf, cpuBetween, parseStat, shortLabel, type CpuSnapshot, type ProcSample } from '../../../packages/bench/src/proc-cpu.js';
import { hopDurations, summarizeHops } from '../../../packages/bench/src/hops.js';
import { ceilingRates, interleave, trackerCounters } from '../../../packages/bench/src/tracker-ceiling.js';

describe('stack processes from /proc', () => {
  it('are classified by command line', () => {
    expect(componentOf('/usr/bin/node --enable-source-maps /work/main/services/router/dist/main.js')).toBe('router');
    expect(componentOf('/usr/bin/node /work/main/services/retry-scheduler/dist/main.js')).toBe('retry-scheduler');
    expect(componentOf('/usr/bin/node /work/main/packages/dev-schema-registry/dist/main.js')).toBe('schema-registry');
    expect(componentOf('java -Xmx512m -cp /x/libs/* kafka.Kafka /work/main/.reach/kafka.properties')).toBe('kafka');
    expect(componentOf('redis-server 127.0.0.1:6379')).toBe('redis');
    expect(componentOf('/usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql/15/main')).toBe('postgres');
    expect(componentOf('postgres: 15/main: postgres reach 127.0.0.1(39690) idle')).toBe('postgres');
    expect(componentOf('/usr/bin/node /work/main/packages/cli/dist/bin.js up')).toBe('supervisor');
    expect(componentOf('/usr/bin/node /work/main/packages/bench/dist/main.js --sweep 50')).toBeUndefined();
    expect(componentOf('psql postgres://postgres@127.0.0.1/reach')).toBeUndefined();
    expect(shortLabel('/usr/bin/node --enable-source-maps /work/main/services/router/dist/main.js')).toBe('node services/router/dist/main.js');
  });

  it('stat fields are counted from the last parenthesis (command names may hold spaces)', () => {
    const fields = Array.from({ length: 50 }, (_, i) => String(i + 3)); // field n holds n
    const stat = `123 (node (x) y) ${fields.join(' ')}`;
    expect(parseStat(stat)).toEqual({ ppid: 4, utime: 14, stime: 15, cutime: 16, cstime: 17, startTicks: 22 });
    expect(parseStat('garbage')).toBeUndefined();
  });

  const snap = (atMs: number, procs: Array<Partial<ProcSample> & { pid: number; cpuTicks: number }>): CpuSnapshot => ({
    atMs,
    procs: new Map(procs.map((p) => [p.pid, { component: 'router', label: '', startTicks: 1, ...p }])),
  });

  it('CPU between two snapshots: differences, whole lives of new processes, restarts flagged', () => {
    const before = snap(0, [
      { pid: 1, cpuTicks: 100 },
      { pid: 2, cpuTicks: 50, component: 'postgres', label: 'postgres: 15/main: postgres reach idle' },
      { pid: 3, cpuTicks: 10, component: 'ingress' },
      { pid: 5, cpuTicks: 10, component: 'postgres', label: 'postgres: 15/main: postgres reach idle' }, // a backend that ended
    ]);
    const after = snap(2000, [
      { pid: 1, cpuTicks: 300 },
      { pid: 2, cpuTicks: 60, component: 'postgres', label: 'postgres: 15/main: postgres reach idle' },
      { pid: 4, cpuTicks: 40, component: 'postgres', label: 'postgres: 15/main: postgres reach idle' }, // a new backend: no churn
      { pid: 3, cpuTicks: 5, component: 'ingress', startTicks: 99 }, // pid reused by a restarted ingress
    ]);
    const use = cpuBetween(before, after);
    expect(use.seconds).toBe(2);
    // CLK_TCK is 100 on Linux
    expect(use.byComponent.get('router')).toBeCloseTo(2);
    expect(use.byComponent.get('postgres')).toBeCloseTo(0.5);
    expect(use.byComponent.get('ingress')).toBeCloseTo(0.05);
    expect([...use.churned]).toEqual(['ingress']);
    // The postmaster is not a backend: a new one is a restarted PostgreSQL.
    const restarted = cpuBetween(
      before,
      snap(2000, [...after.procs.values(), { pid: 9, cpuTicks: 1, component: 'postgres', label: '/usr/lib/postgresql/15/bin/postgres -D x' }]),
    );
    expect([...restarted.churned].sort()).toEqual(['ingress', 'postgres']);
  });

  it('cost per message takes the idle rate off each component and divides by what was delivered', () => {
    const use = (seconds: number, c: Record<string, number>) => ({
      seconds,
      byComponent: new Map(Object.entries(c)),
      byProcess: [],
      churned: new Set<string>(),
    });
    const cost = cpuCost({
      idle: use(5, { router: 0.5, kafka: 0.25 }),
      loaded: use(10, { router: 3, kafka: 1.5 }),
      messages: 10_000,
      benchCpuUs: 2e6,
      cores: 2,
    });
    expect(cost.components.router!.usPerMsg).toBeCloseTo(200); // (3 − 0.1 × 10) s / 10,000
    expect(cost.components.kafka!.usPerMsg).toBeCloseTo(100);
    expect(cost.components.router!.share).toBeCloseTo(2 / 3);
    expect(cost.components.router!.idlePctCore).toBeCloseTo(10);
    expect(cost.totalUsPerMsg).toBeCloseTo(300);
    expect(cost.stackMachineShare).toBeCloseTo(4.5 / 20);
    expect(cost.bench).toEqual({ usPerMsg: 200, machineShare: 0.1 });
    expect(cpuCost({ idle: use(5, {}), loaded: use(10, { router: 1 }), messages: 0, benchCpuUs: 0, cores: 2 }).totalUsPerMsg).toBeNaN();
  });
});

describe('per-hop breakdown', () => {
  const m = { messageId: 'msg_1', sentAt: 1000, receivedAt: 1040 };
  const ev = (state: string, ms: number) => ({ state, at: new Date(ms).toISOString(), attempt: 0 });

  it('takes each hop from the first event of its state, and the bench times around the agent', () => {
    const events = [ev('PENDING', 1005), ev('ROUTED', 1015), ev('DELIVERING', 1030), ev('DELIVERING', 1090), ev('DELIVERED', 1050)];
    expect(hopDurations(m, events)).toEqual([5, 10, 15, 10, 10]);
    expect(hopDurations(m, events.slice(0, 3))).toBeUndefined();
    const s = summarizeHops(1000, 3, [hopDurations(m, events), undefined, [1, 2, 3, 4, 5]]);
    expect(s.complete).toBe(2);
    expect(s.hops[0]).toMatchObject({ hop: 'send → PENDING (ingress)', count: 2 });
  });
});

describe('tracker ceiling', () => {
  it('interleaves each message\u2019s four states `spread` messages apart, in order per message', () => {
    const order = interleave(3, 2);
    expect(order).toHaveLength(12);
    for (let i = 0; i < 3; i++) expect(order.filter((o) => o.message === i).map((o) => o.state)).toEqual([0, 1, 2, 3]);
    expect(order.slice(0, 4)).toEqual([
      { message: 0, state: 0 },
      { message: 1, state: 0 },
      { message: 2, state: 0 },
      { message: 0, state: 1 },
    ]);
  });

  it('reads the timeline events and DELIVERED outcomes from the tracker\u2019s metrics', () => {
    const text = [
      '# HELP reach_tracker_rows_written_total Rows written',
      'reach_tracker_rows_written_total{table="messages"} 10',
      '# HELP reach_tracker_timeline_events_total Status events newly recorded',
      'reach_tracker_timeline_events_total 40',
      'reach_tracker_outcomes_total{state="DELIVERED",first_attempt="true"} 9',
      'reach_tracker_outcomes_total{state="DELIVERED",first_attempt="false"} 1',
      'reach_tracker_outcomes_total{state="DEAD",first_attempt="false"} 3',
    ].join('\n');
    expect(trackerCounters(text)).toEqual({ events: 40, delivered: 10 });
  });

  it('takes the ceiling over the intervals the tracker had a backlog throughout, else the overall rate as a lower bound', () => {
    const at = (t: number, acked: number, events: number) => ({ atMs: t * 1000, acked, events, rows: events / 4 });
    const samples = [at(0, 0, 0), at(1, 4000, 500), at(2, 8000, 1500), at(3, 8000, 5500), at(4, 8000, 8000)];
    const r = ceilingRates(samples, { messages: 2000, events: 8000, seconds: 4, threshold: 2000 });
    // backlog 3500 → 6500 → 2500 → 0: saturated over [1, 2] and [2, 3]
    expect(r).toMatchObject({ basis: 'saturated', saturatedS: 2, eventsPerS: 2500, rowsPerS: 625, peakBacklog: 6500, producerLimited: false });
    expect(r.overall).toEqual({ rowsPerS: 500, eventsPerS: 2000 });
    const keptUp = ceilingRates([at(0, 0, 0), at(1, 4000, 3500), at(2, 8000, 8000)], { messages: 2000, events: 8000, seconds: 2, threshold: 2000 });
    expect(keptUp).toMatchObject({ basis: 'overall', producerLimited: true, eventsPerS: 4000 });
  });
});
