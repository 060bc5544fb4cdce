import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { requireTool, run, scrapeLocalStack, unknownMetrics } from './promql.js';

// The Grafana dashboard docker-compose provisions (issue #6.5): well-formed for Grafana, wired
// to the provisioned datasource, every query valid PromQL (Prometheus's own parser, through
// promtool) and reading only metrics the running services export.

interface Target {
  refId?: string;
  expr?: string;
  datasource?: { type?: string; uid?: string };
}
interface Panel {
  id?: number;
  type?: string;
  title?: string;
  gridPos?: { h: number; w: number; x: number; y: number };
  datasource?: { type?: string; uid?: string };
  targets?: Target[];
  panels?: Panel[];
}
interface Dashboard {
  uid?: string;
  title?: string;
  schemaVersion?: number;
  panels?: Panel[];
}

const dashboard = JSON.parse(readFileSync('deploy/grafana/dashboards/agent-reach.json', 'utf8')) as Dashboard;
const datasources = (
  parse(readFileSync('deploy/grafana/provisioning/datasources/prometheus.yml', 'utf8')) as { datasources: Array<{ uid: string; type: string }> }
).datasources;
const provider = parse(readFileSync('deploy/grafana/provisioning/dashboards/provider.yml', 'utf8')) as {
  providers: Array<{ type: string; options: { path: string } }>;
};
const compose = parse(readFileSync('docker-compose.yml', 'utf8'), { merge: true }) as { services: Record<string, { volumes?: string[] }> };

const allPanels = (dashboard.panels ?? []).flatMap((p) => [p, ...(p.panels ?? [])]);
const queryPanels = allPanels.filter((p) => p.type !== 'row');
const queries = queryPanels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title ?? `#${p.id}`, ...t })));

describe('Grafana dashboard', () => {
  it('is a Grafana dashboard: uid, title, schemaVersion, panels with unique ids', () => {
    expect(dashboard.uid).toMatch(/^[a-zA-Z0-9_-]{1,40}$/);
    expect(dashboard.title).toBeTruthy();
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    const ids = allPanels.map((p) => p.id);
    expect(ids.every((id) => Number.isInteger(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(queryPanels.length).toBeGreaterThanOrEqual(20);
  });

  it('lays every panel out on the 24-column grid without overlaps', () => {
    const cells = new Set<string>();
    for (const p of allPanels) {
      const g = p.gridPos!;
      expect(g, `panel ${p.title}`).toBeDefined();
      for (const v of [g.h, g.w, g.x, g.y]) expect(Number.isInteger(v) && v >= 0).toBe(true);
      expect(g.w).toBeGreaterThan(0);
      expect(g.x + g.w).toBeLessThanOrEqual(24);
      for (let x = g.x; x < g.x + g.w; x++) {
        for (let y = g.y; y < g.y + g.h; y++) {
          expect(cells.has(`${x},${y}`), `${p.title} overlaps another panel at ${x},${y}`).toBe(false);
          cells.add(`${x},${y}`);
        }
      }
    }
  });

  it('queries only the provisioned Prometheus datasource, every target with a refId and an expr', () => {
    const prometheus = datasources.find((d) => d.type === 'prometheus')!;
    expect(prometheus.uid).toBeTruthy();
    for (const p of queryPanels) {
      expect(p.datasource, p.title).toEqual({ type: 'prometheus', uid: prometheus.uid });
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      const refIds = p.targets!.map((t) => t.refId);
      expect(new Set(refIds).size, p.title).toBe(refIds.length);
      for (const t of p.targets!) {
        expect(t.datasource, p.title).toEqual({ type: 'prometheus', uid: prometheus.uid });
        expect(t.expr?.trim(), p.title).toBeTruthy();
      }
    }
  });

  it('shows what issue #6 asks for: throughput, latency percentiles, success and retry rates, lag, DLQ, connections, circuits, quota rejections', () => {
    const exprs = queries.map((q) => q.expr!).join('\n');
    for (const needle of [
      'reach_ingress_messages_total',
      'histogram_quantile(0.99',
      'reach_tracker_outcomes_total{state="DELIVERED", first_attempt="true"}',
      'reach_dispatcher_retries_scheduled_total',
      'reach_console_consumer_lag_messages',
      'reach_dead_letter_stored_total',
      'reach_dispatcher_connections',
      'reach_router_circuit_open_agents',
      'code="4129"',
    ]) {
      expect(exprs).toContain(needle);
    }
  });

  it('is provisioned by docker-compose: provider path mounted, datasource and dashboards mounted into Grafana', () => {
    const volumes = compose.services.grafana?.volumes ?? [];
    expect(volumes).toContain('./deploy/grafana/provisioning:/etc/grafana/provisioning:ro');
    expect(volumes.some((v) => v.startsWith('./deploy/grafana/dashboards:') && v.split(':')[1] === provider.providers[0]!.options.path)).toBe(true);
    expect(provider.providers[0]!.type).toBe('file');
  });

  it('every query is valid PromQL (promtool parses them as recording rules)', () => {
    const promtool = requireTool('promtool');
    const dir = mkdtempSync(join(tmpdir(), 'reach-grafana-'));
    try {
      // Grafana's $__rate_interval and friends become a plain duration for the parser.
      const rules = queries.map((q, i) => ({ record: `dashboard:query_${i}`, expr: q.expr!.replace(/\$__\w+/g, '5m') }));
      writeFileSync(join(dir, 'dashboard.rules.yml'), stringify({ groups: [{ name: 'dashboard', rules }] }));
      expect(run(promtool, ['check', 'rules', join(dir, 'dashboard.rules.yml')])).toMatch(new RegExp(`SUCCESS: ${rules.length} rules found`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('against the running services', () => {
    let exported: Set<string>;
    beforeAll(async () => {
      exported = new Set([...(await scrapeLocalStack()).values()].flatMap((names) => [...names]));
    });

    it('every metric a panel reads is exported by a service', () => {
      const missing = queries.flatMap((q) => unknownMetrics(q.expr!, exported).map((m) => `${q.panel}: ${m}`));
      expect([...new Set(missing)]).toEqual([]);
    });
  });
});
