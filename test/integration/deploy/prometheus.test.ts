import { readdirSync, readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { requireTool, run, scrapeJobs, scrapeLocalStack, unknownMetrics } from './promql.js';

// The alerting rules (R-F3) and the scrape config, checked with Prometheus's own promtool
// (Debian's prometheus package, installed by scripts/ensure-tools.sh) and against the metric
// names the running services really export.

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleTest {
  name: string;
  alert_rule_test?: Array<{ alertname: string; exp_alerts?: unknown[] }>;
}

const DIR = 'deploy/prometheus';
const rules = (parse(readFileSync(`${DIR}/alerts.yml`, 'utf8')) as { groups: Array<{ name: string; rules: Rule[] }> }).groups.flatMap((g) => g.rules);
const alerts = rules.filter((r) => r.alert);
const tests = (parse(readFileSync(`${DIR}/alerts.test.yml`, 'utf8')) as { tests: RuleTest[] }).tests;

describe('promtool', () => {
  let promtool: string;
  beforeAll(() => {
    promtool = requireTool('promtool');
  });

  it('accepts the alerting rules (promtool check rules)', () => {
    expect(run(promtool, ['check', 'rules', `${DIR}/alerts.yml`])).toMatch(/SUCCESS: \d+ rules found/);
  });

  it('passes the rule unit tests (promtool test rules)', () => {
    expect(run(promtool, ['test', 'rules', `${DIR}/alerts.test.yml`])).toMatch(/SUCCESS/);
  });

  it('accepts the scrape config with its rule file (promtool check config)', () => {
    expect(run(promtool, ['check', 'config', `${DIR}/prometheus.yml`])).toMatch(/is valid prometheus config file/);
  });
});

describe('alerting rules', () => {
  it('cover every alert R-F3 and issue #6 ask for', () => {
    const names = alerts.map((a) => a.alert);
    for (const required of [
      'ReachRetryRateHigh',
      'ReachWebSocketConnectSuccessLow',
      'ReachAgentEjected',
      'ReachDeadLetterInflowHigh',
      'ReachConsumerLagGrowing',
      'ReachBudgetExceededDeaths',
    ]) {
      expect(names).toContain(required);
    }
    expect(alerts.find((a) => a.alert === 'ReachWebSocketConnectSuccessLow')?.labels?.severity).toBe('P1');
  });

  it.each(alerts.map((a) => [a.alert!, a] as const))('%s has a severity, summary, description, runbook hint and a for: duration', (_name, a) => {
    expect(a.labels?.severity).toMatch(/^P[123]$/);
    for (const key of ['summary', 'description', 'runbook']) expect(a.annotations?.[key]?.trim().length ?? 0).toBeGreaterThan(10);
    expect(a.for).toMatch(/^\d+[smh]$/);
  });

  it.each(alerts.map((a) => [a.alert!] as const))('%s is unit-tested firing and silent', (name) => {
    const cases = tests.flatMap((t) => (t.alert_rule_test ?? []).filter((c) => c.alertname === name));
    expect(
      cases.some((c) => (c.exp_alerts ?? []).length > 0),
      'a case where it fires',
    ).toBe(true);
    expect(
      cases.some((c) => (c.exp_alerts ?? []).length === 0),
      'a case where it stays silent',
    ).toBe(true);
  });
});

describe('against the running services', () => {
  let exported: Set<string>;
  beforeAll(async () => {
    exported = new Set([...(await scrapeLocalStack()).values()].flatMap((names) => [...names]));
  });

  it('scrape config has a job for every service and the console, each answering /metrics', () => {
    const services = readdirSync('services', { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
    const jobs = scrapeJobs().map((j) => j.job);
    expect(services.length).toBeGreaterThanOrEqual(8);
    for (const s of services) expect(jobs).toContain(`reach-${s}`);
    // scrapeLocalStack() in beforeAll fetched every job's target: all answered
    expect(exported.size).toBeGreaterThan(100);
  });

  it('every metric the rules read is exported by a service', () => {
    const missing = rules.flatMap((r) => unknownMetrics(r.expr, exported).map((m) => `${r.alert ?? r.record}: ${m}`));
    expect(missing).toEqual([]);
  });
});
