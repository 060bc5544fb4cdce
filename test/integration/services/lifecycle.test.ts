import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { tokenSecret } from '../../helpers/env.js';
import { spawnService as start, waitReady } from '../../helpers/services.js';

// Every service, started as its own extra instance next to the running stack: it connects to
// Kafka and the schema registry, serves /healthz, /readyz and /metrics, and stops cleanly
// (exit 0) on SIGTERM. Invalid configuration stops it at once with a message naming the variable.
const SERVICES = ['ingress', 'registry', 'router', 'dispatcher', 'retry-scheduler', 'dead-letter', 'tracker', 'console'] as const;

describe.each(SERVICES)('service %s', (service) => {
  it('starts, serves health, readiness and metrics, and stops cleanly on SIGTERM', async () => {
    const s = start(service, {});
    const base = `http://127.0.0.1:${await s.port}`;
    await waitReady(base);

    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: 'ok', service });

    const metrics = await fetch(`${base}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await metrics.text();
    const prefix = `reach_${service.replace(/-/g, '_')}_`;
    expect(text).toContain(`${prefix}process_cpu_user_seconds_total`);
    // Every metric this process exports follows reach_<service>_<what>_<unit>.
    const names = [...text.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]!);
    expect(names.length).toBeGreaterThan(5);
    expect(names.filter((n) => !n.startsWith(prefix))).toEqual([]);

    expect(await s.stop(), s.output()).toBe(0);
    expect(s.output()).toContain('"msg":"stopped"');
  });
});

describe('invalid configuration', () => {
  it('stops at once with exit code 78, naming the bad variable', async () => {
    const s = start('ingress', { REACH_INGRESS_PORT: 'eighty' });
    const [code] = (await once(s.child, 'exit')) as [number | null];
    expect(code).toBe(78);
    expect(s.output()).toMatch(/REACH_INGRESS_PORT="eighty" is invalid: expected an integer/);
  });

  it('refuses an unknown REACH_ variable with a did-you-mean hint', async () => {
    const s = start('router', { REACH_KAFKA_BROKER: '127.0.0.1:9092' });
    const [code] = (await once(s.child, 'exit')) as [number | null];
    expect(code).toBe(78);
    expect(s.output()).toMatch(/REACH_KAFKA_BROKER \(did you mean REACH_KAFKA_BROKERS\?\)/);
  });

  it('refuses options that do not fit together, naming both (issue #30)', async () => {
    const s = start('dispatcher', { REACH_WS_PING_INTERVAL_MS: '40000' });
    const [code] = (await once(s.child, 'exit')) as [number | null];
    expect(code).toBe(78);
    expect(s.output()).toMatch(/REACH_WS_PING_INTERVAL_MS=40000 must be < REACH_WS_IDLE_TIMEOUT_MS=30000/);
  });

  it('refuses to start a service that requires token keys without any (exit 78)', async () => {
    const s = start('dispatcher', { REACH_TOKEN_SECRET: '' });
    const [code] = (await once(s.child, 'exit')) as [number | null];
    expect(code).toBe(78);
    expect(s.output()).toMatch(/dispatcher: REACH_TOKEN_SECRET is required, or REACH_TOKEN_SECRETS \/ REACH_TOKEN_SECRETS_FILE/);
  });
});

describe('staged configuration (issue #30)', () => {
  it('ingress starts on a key ring alone (no REACH_TOKEN_SECRET), as the key rotation ends', async () => {
    const s = start('ingress', { REACH_TOKEN_SECRET: '', REACH_TOKEN_SECRETS: `k1:${tokenSecret()}` });
    await waitReady(`http://127.0.0.1:${await s.port}`);
    expect(await s.stop(), s.output()).toBe(0);
  });

  it('accepts a removed per-stage budget variable with a deprecation warning', async () => {
    const s = start('router', { REACH_BUDGET_ROUTE_MS: '2000' });
    await waitReady(`http://127.0.0.1:${await s.port}`);
    expect(s.output()).toMatch(/"level":"warn".*REACH_BUDGET_ROUTE_MS is deprecated and ignored/);
    expect(await s.stop(), s.output()).toBe(0);
  });
});
