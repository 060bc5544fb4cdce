import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { adminToken, tokenSecret, uniq } from '../../helpers/env.js';

// Every service, started as its own extra instance next to the running stack: it connects to
// Kafka and the schema registry, serves /healthz, /readyz and /metrics, and stops cleanly
// (exit 0) on SIGTERM. Invalid configuration stops it at once with a message naming the variable.
const SERVICES = ['ingress', 'registry', 'router', 'dispatcher', 'retry-scheduler', 'dead-letter', 'tracker', 'console'] as const;

function portVar(service: string): string {
  return `REACH_${service.toUpperCase().replace(/-/g, '_')}_PORT`;
}

interface Started {
  child: ChildProcess;
  output: () => string;
  port: Promise<number>;
}

function start(service: string, env: Record<string, string>): Started {
  const child = spawn(process.execPath, [join('services', service, 'dist/main.js')], {
    env: {
      ...process.env,
      // what `reach up` gives every service
      REACH_TOKEN_SECRET: tokenSecret(),
      REACH_ADMIN_TOKEN: adminToken(),
      REACH_INSTANCE_ID: uniq(`${service}-lifecycle`),
      [portVar(service)]: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const port = new Promise<number>((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /"port":(\d+),"msg":"http listening"/.exec(out);
      if (m) resolve(Number(m[1]));
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${service} exited with ${code} before listening:\n${out}`)));
  });
  port.catch(() => undefined);
  return { child, output: () => out, port };
}

async function waitReady(base: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await fetch(`${base}/readyz`).catch(() => undefined);
    if (res?.status === 200) return;
    if (Date.now() > deadline) throw new Error(`${base} not ready after ${timeoutMs} ms (last status ${res?.status})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

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

    const exited = once(s.child, 'exit');
    s.child.kill('SIGTERM');
    const [code] = (await exited) as [number | null];
    expect(code, s.output()).toBe(0);
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
});
