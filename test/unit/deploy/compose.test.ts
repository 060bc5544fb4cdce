import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Ajv } from 'ajv';
import { validate as lintDockerfile } from 'dockerfile-utils';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ConfigError, loadConfig, OPTIONS, type OptionKey } from '@reach/core';
import { requireTool, run } from '../../integration/deploy/promql.js';
import { QUIET_SERVICE_NODE_FLAGS, QUIET_SERVICES } from '@reach/cli';

/** The node flags the quiet services add (packages/cli local/stack.ts), as the local stack runs them. */
const quietFlags = (name: string): string[] => (QUIET_SERVICES.includes(name) ? [...QUIET_SERVICE_NODE_FLAGS] : []);

// docker-compose.yml (R-H1) and its Dockerfile. No Docker engine runs here, so the file is
// checked by docker-compose's own loader (`docker-compose config`: interpolation, merge keys,
// references), the Compose Specification JSON schema, the dclint linter, and what only this
// project knows: every service has a container, start order, health checks, valid REACH_* config.

interface Service {
  image?: string;
  build?: { context: string; dockerfile: string };
  command?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  volumes?: Array<string | { source?: string; target: string; type: string }>;
  ports?: Array<string | { target: number; published: string | number; host_ip?: string }>;
  restart?: string;
}

const execFileAsync = promisify(execFile);
const SECRETS = { REACH_ADMIN_TOKEN: 'a'.repeat(32), REACH_TOKEN_SECRET: 'b'.repeat(32), GRAFANA_ADMIN_PASSWORD: 'c'.repeat(16) };
const serviceDirs = readdirSync('services', { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => d.name);
const optionByEnv = new Map(Object.entries(OPTIONS).map(([key, o]) => [o.env, key as OptionKey]));
const volumeTarget = (v: NonNullable<Service['volumes']>[number]) => (typeof v === 'string' ? v.split(':')[1] : v.target);

/** A clean environment: no REACH_* or compose variables of the machine leak into the checks. */
function composeEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME };
  return { ...env, ...extra };
}

// docker-compose is a Python program: each run takes seconds.
describe('docker-compose.yml', { timeout: 60_000 }, () => {
  let services: Record<string, Service>;
  let volumes: Record<string, unknown>;

  beforeAll(() => {
    const compose = requireTool('docker-compose');
    const resolved = parse(run(compose, ['-f', 'docker-compose.yml', 'config'], { env: composeEnv(SECRETS) })) as {
      services: Record<string, Service>;
      volumes: Record<string, unknown>;
    };
    services = resolved.services;
    volumes = resolved.volumes;
  }, 60_000);

  it('is accepted by docker-compose (config -q)', () => {
    expect(() => run(requireTool('docker-compose'), ['-f', 'docker-compose.yml', 'config', '-q'], { env: composeEnv(SECRETS) })).not.toThrow();
  });

  it('refuses to start without the secrets instead of defaulting them', async () => {
    const compose = requireTool('docker-compose');
    const failures = await Promise.all(
      Object.keys(SECRETS).map(async (missing) => {
        const env = composeEnv(Object.fromEntries(Object.entries(SECRETS).filter(([k]) => k !== missing)));
        const err = await execFileAsync(compose, ['-f', 'docker-compose.yml', 'config', '-q'], { env }).then(
          () => undefined,
          (e: { stderr?: string }) => e.stderr ?? String(e),
        );
        return { missing, err };
      }),
    );
    for (const { missing, err } of failures) expect(err, `without ${missing}`).toContain(missing);
  });

  it('validates against the Compose Specification JSON schema', () => {
    // dclint ships the current compose-spec schema; it is draft-07, named by a URL Ajv does not know.
    const { $schema: _draft, ...schema } = JSON.parse(readFileSync('node_modules/dclint/schemas/compose.schema.json', 'utf8')) as Record<string, unknown>;
    const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false });
    const check = ajv.compile(schema);
    const doc = parse(readFileSync('docker-compose.yml', 'utf8'), { merge: true }) as unknown;
    check(doc);
    expect(check.errors ?? []).toEqual([]);
  });

  it('has no dclint errors (schema, unbound ports, build and image together, ...)', () => {
    const out = run(process.execPath, ['node_modules/dclint/bin/dclint.cjs', '-q', '-f', 'json', 'docker-compose.yml']);
    const messages = (JSON.parse(out || '[]') as Array<{ messages: Array<{ type: string; message: string }> }>).flatMap((f) => f.messages);
    expect(messages.filter((m) => m.type === 'error')).toEqual([]);
  });

  it('runs every service of services/ from the one Dockerfile, with its own port and readiness check', () => {
    expect(serviceDirs.length).toBeGreaterThanOrEqual(8);
    for (const name of serviceDirs) {
      const s = services[name];
      expect(s, `a container for services/${name}`).toBeDefined();
      expect(s!.build?.dockerfile).toBe('deploy/docker/Dockerfile');
      expect(s!.command).toEqual([...quietFlags(name), `services/${name}/dist/main.js`]);
      expect(existsSync(join('services', name, 'src', 'main.ts'))).toBe(true);
      const portOption = Object.values(OPTIONS).find((o) => o.env === `REACH_${name.toUpperCase().replace(/-/g, '_')}_PORT`);
      const port = portOption?.default as number;
      expect(port, `REACH_*_PORT of ${name}`).toBeTypeOf('number');
      expect(s!.healthcheck?.test).toEqual(['CMD', 'node', 'deploy/docker/healthcheck.mjs', `http://127.0.0.1:${port}/readyz`]);
      expect(s!.ports?.map((p) => (typeof p === 'string' ? p.replace(/\/tcp$/, '') : `${p.host_ip}:${p.published}:${p.target}`))).toEqual([
        `127.0.0.1:${port}:${port}`,
      ]);
    }
  });

  it('has the backing services of docs/design.md §7: Kafka (KRaft), a Confluent schema registry, Redis append-only, PostgreSQL with a volume', () => {
    const pom = readFileSync('deploy/local/pom.xml', 'utf8');
    const kafkaVersion = /<kafka\.version>([^<]+)<\/kafka\.version>/.exec(pom)![1];
    expect(services.kafka?.image).toBe(`apache/kafka:${kafkaVersion}`);
    expect(services.kafka?.environment?.KAFKA_PROCESS_ROLES).toBe('broker,controller');
    expect(services['schema-registry']?.image).toMatch(/^confluentinc\/cp-schema-registry:\d+\.\d+\.\d+$/);
    expect(services.redis?.command?.join(' ')).toContain('--appendonly yes');
    expect(services.redis?.volumes?.map(volumeTarget)).toContain('/data');
    expect(services.postgres?.volumes?.map(volumeTarget)).toContain('/var/lib/postgresql/data');
    expect(services.kafka?.volumes?.map(volumeTarget)).toContain(services.kafka?.environment?.KAFKA_LOG_DIRS);
    for (const v of ['kafka-data', 'pg-data', 'redis-data']) expect(Object.keys(volumes)).toContain(v);
  });

  it('configures Kafka like the local broker (deploy/local/server.properties)', () => {
    // Listener addresses and the data directory differ by nature; everything else must match.
    const differ = new Set(['listeners', 'advertised.listeners', 'controller.quorum.voters']);
    const props = readFileSync('deploy/local/server.properties', 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'))
      .map((l) => l.split('=', 2) as [string, string])
      .filter(([k]) => !differ.has(k));
    expect(props.length).toBeGreaterThan(15);
    const env = services.kafka!.environment!;
    for (const [key, value] of props) expect(String(env[`KAFKA_${key.toUpperCase().replace(/\./g, '_')}`]), key).toBe(value);
  });

  it('starts in order: backing services healthy → deploy step completed → services healthy → console', () => {
    for (const [name, s] of Object.entries(services)) {
      for (const [dep, { condition }] of Object.entries(s.depends_on ?? {})) {
        expect(services[dep], `${name} depends on ${dep}`).toBeDefined();
        if (dep === 'setup') expect(condition).toBe('service_completed_successfully');
        else expect(condition, `${name} → ${dep}`).toBe(services[dep]!.healthcheck ? 'service_healthy' : 'service_started');
      }
    }
    expect(services.setup?.command).toEqual(['packages/cli/dist/bin.js', 'setup']);
    expect(services.setup?.restart).toBe('no');
    expect(Object.keys(services.setup?.depends_on ?? {}).sort()).toEqual(['kafka', 'postgres', 'schema-registry']);
    for (const name of serviceDirs.filter((n) => n !== 'console')) {
      expect(Object.keys(services[name]!.depends_on ?? {}).sort(), name).toEqual(['redis', 'setup']);
    }
    expect(Object.keys(services.console!.depends_on ?? {}).sort()).toEqual(serviceDirs.filter((n) => n !== 'console').sort());
  });

  it('checks the health of every long-running container', () => {
    for (const [name, s] of Object.entries(services)) {
      if (s.restart === 'no') continue; // the one-shot deploy step
      expect(s.healthcheck?.test?.length, name).toBeGreaterThan(0);
    }
  });

  it('gives every container REACH_* settings that the config catalog accepts (names and values)', () => {
    const keys = Object.keys(OPTIONS) as OptionKey[];
    let checked = 0;
    for (const [name, s] of Object.entries(services)) {
      const env = s.environment ?? {};
      const reach = Object.keys(env).filter((k) => k.startsWith('REACH_'));
      if (reach.length === 0) continue;
      checked++;
      for (const k of reach) expect(optionByEnv.has(k), `${name}: ${k} is no option of packages/core/src/config.ts`).toBe(true);
      try {
        loadConfig(keys, env);
      } catch (err) {
        if (err instanceof ConfigError) throw new Error(`${name}: ${err.message}`);
        throw err;
      }
      expect(env.REACH_HTTP_HOST, name).toBe('0.0.0.0');
      expect(env.REACH_KAFKA_BROKERS, name).toBe('kafka:9092');
    }
    expect(checked).toBe(serviceDirs.length + 1); // every service and the deploy step
  });

  it('runs Prometheus with the alert rules and Grafana provisioned', () => {
    expect(services.prometheus?.volumes?.map((v) => (typeof v === 'string' ? v : `${v.source}:${v.target}`)).join(' ')).toMatch(
      /deploy\/prometheus:\/etc\/prometheus/,
    );
    expect(services.prometheus?.command).toContain('--config.file=/etc/prometheus/prometheus.yml');
    expect(services.grafana?.depends_on?.prometheus?.condition).toBe('service_healthy');
  });
});

describe('deploy/docker/Dockerfile', () => {
  const text = readFileSync('deploy/docker/Dockerfile', 'utf8');
  const stages = [...text.matchAll(/^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/gim)].map((m) => ({ image: m[1]!, name: m[2] }));
  const finalStage = text.slice(text.lastIndexOf('\nFROM '));

  it('passes the Dockerfile linter (dockerfile-utils)', () => {
    expect(lintDockerfile(text).map((d) => `line ${d.range.start.line + 1}: ${d.message}`)).toEqual([]);
  });

  it('is multi-stage on Node 24 (the engines of package.json) and runs as the unprivileged node user', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(stages.at(-1)!.name).toBeUndefined();
    // The image's Node is the one the project runs on (package.json engines: Node 20 reached its end of life).
    const major = /\d+/.exec((JSON.parse(readFileSync('package.json', 'utf8')) as { engines: { node: string } }).engines.node)![0];
    expect(major).toBe('24');
    for (const s of stages) expect(new RegExp(`^node:${major}[.-]`).test(s.image) || stages.some((x) => x.name === s.image), s.image).toBe(true);
    expect(finalStage).toMatch(/^USER node$/m);
    expect(finalStage).not.toMatch(/pnpm install(?!.*--prod)/);
    expect(text).toMatch(/pnpm install --offline --frozen-lockfile --prod/);
  });

  it('keeps dependencies, build output and local state out of the build context', () => {
    const ignore = readFileSync('.dockerignore', 'utf8').split('\n');
    for (const p of ['.git', '.reach', '**/node_modules', '**/dist']) expect(ignore).toContain(p);
  });
});
