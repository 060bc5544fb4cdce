import { mkdtempSync, writeFileSync, appendFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { metricSamples, parseCommandStats, workCost, type WorkSnapshot } from '../../../packages/bench/src/work-count.js';
import { workRows } from '../../../packages/bench/src/report.js';
import type { StepResult } from '../../../packages/bench/src/results.js';

const snapshot = (over: Partial<WorkSnapshot>): WorkSnapshot => ({
  produced: {},
  consumed: {},
  requests: {},
  redis: {},
  pgStatements: {},
  pg: { xacts: 0, inserted: 0, updated: 0, deleted: 0 },
  logBytes: {},
  ...over,
});

describe('bench work per message', () => {
  it('reads calls by command from INFO commandstats', () => {
    const info = '# Commandstats\r\ncmdstat_evalsha:calls=120,usec=900,usec_per_call=7.5\r\ncmdstat_zadd:calls=7,usec=10\r\nnot a stat\r\n';
    expect(parseCommandStats(info)).toEqual({ evalsha: 120, zadd: 7 });
  });

  it('reads one metric of a Prometheus page, by its label', () => {
    const page = [
      '# HELP reach_router_kafka_requests_total Kafka requests',
      'reach_router_kafka_requests_total{api="Produce"} 42',
      'reach_router_kafka_requests_total{api="Fetch"} 40',
      'reach_router_kafka_requests_total_other{api="Fetch"} 9',
      'reach_router_pg_statements_total 3',
    ].join('\n');
    expect(metricSamples(page, 'reach_router_kafka_requests_total')).toEqual({ Produce: 42, Fetch: 40 });
    expect(metricSamples(page, 'reach_router_pg_statements_total')).toEqual({ '': 3 });
  });

  it('divides what was done between two snapshots by the messages delivered, log lines included', () => {
    const dir = mkdtempSync(join(tmpdir(), 'work-'));
    writeFileSync(join(dir, 'router.log'), 'old line\n');
    const from = statSync(join(dir, 'router.log')).size;
    appendFileSync(join(dir, 'router.log'), 'a\nb\nc\nd\n');
    const to = statSync(join(dir, 'router.log')).size;
    appendFileSync(join(dir, 'router.log'), 'after the window\n');
    const a = snapshot({ produced: { 'reach.pending.v1': 100 }, requests: { router: { Produce: 10 } }, redis: { get: 5 }, logBytes: { router: from } });
    const b = snapshot({
      produced: { 'reach.pending.v1': 300, 'reach.routed.v1': 200 },
      requests: { router: { Produce: 14, Fetch: 2 }, ingress: {} },
      redis: { get: 405, set: 5 },
      pg: { xacts: 8, inserted: 1000, updated: 200, deleted: 0 },
      logBytes: { router: to },
    });
    const w = workCost(a, b, 200, dir);
    expect(w.produced).toEqual({ 'reach.pending.v1': 1, 'reach.routed.v1': 1 });
    expect(w.requests).toEqual({ router: { Produce: 0.02, Fetch: 0.01 } });
    expect(w.redis).toEqual({ get: 2, set: 0.025 });
    expect(w.pg).toEqual({ xacts: 0.04, inserted: 5, updated: 1 });
    expect(w.logLines).toEqual({ router: 0.02 });
  });

  it('prints a row per thing counted, totals always, and nothing for steps without counts', () => {
    const w = workCost(snapshot({}), snapshot({ produced: { t1: 300 }, redis: { evalsha: 900, zadd: 1 } }), 300, '/nonexistent');
    const step = { rate: 1000, role: 'sweep', work: w } as unknown as StepResult;
    const rows = workRows([step]);
    const byName = Object.fromEntries(rows.map((r) => [String(r['per DELIVERED message']).trim(), r['1000/s']]));
    expect(byName['Kafka records produced']).toBe('1.00');
    expect(byName['Redis commands (those scripts run included)']).toBe('3.00');
    expect(byName.evalsha).toBe('3.00');
    expect(byName.zadd).toBeUndefined();
    expect(byName['log lines']).toBe('0.000');
    expect(workRows([{ rate: 50, role: 'sweep' } as unknown as StepResult])).toEqual([]);
  });
});
