import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync, rmSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig, silentLogger, type Logger } from '@reach/core';
import { createKafka } from '@reach/kafka';
import { ROOT, paths, reachHome, type Paths } from '../paths.js';
import { done, step, withProgress } from '../output.js';
import { ensurePostgres, ensureRedis } from './deps.js';
import { fetchKafka, formatKafka, kafkaCommand, kafkaFetched, kafkaVersion } from './kafka.js';
import { httpOk, portOpen } from './net.js';
import { setupStack } from './setup.js';
import { Supervisor } from './supervisor.js';

/** The services in start order (producers of the change feeds first). */
export const SERVICES = [
  { name: 'registry', port: 'registryPort' },
  { name: 'tracker', port: 'trackerPort' },
  { name: 'dead-letter', port: 'deadLetterPort' },
  { name: 'router', port: 'routerPort' },
  { name: 'retry-scheduler', port: 'retrySchedulerPort' },
  { name: 'dispatcher', port: 'dispatcherPort' },
  { name: 'ingress', port: 'ingressPort' },
  { name: 'console', port: 'consolePort' },
] as const;

export interface StackState {
  supervisorPid: number;
  startedAt: string;
  ready: boolean;
  error?: string;
  endpoints: Record<string, string>;
  processes: Array<{ name: string; pid: number | undefined }>;
  adminTokenFile?: string;
  /** The router's REACH_RULES_FILE. */
  rulesFile?: string;
}

export function readState(p: Paths): StackState | undefined {
  if (!existsSync(p.state)) return undefined;
  try {
    return JSON.parse(readFileSync(p.state, 'utf8')) as StackState;
  } catch {
    return undefined;
  }
}

export function writeState(p: Paths, s: StackState): void {
  writeFileSync(p.state, JSON.stringify(s, null, 2));
}

export function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function hostPort(url: string, defPort: number): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: u.port ? Number(u.port) : defPort };
}

const EMPTY_RULES_FILE = `# ReachRules for the local stack (docs/rules.md). The router reloads this file within 1 s
# of a change; \`reach rules check <file>\` validates it. deploy/rules.yaml has examples.
rules: []
`;

/** The local rules file, created with no rules the first time. */
function localRulesFile(file: string): string {
  if (!existsSync(file)) writeFileSync(file, EMPTY_RULES_FILE);
  return file;
}

/** A secret from the environment, or one generated once into the state dir (mode 0600). */
function localSecret(file: string, given: string | undefined): { value: string; file?: string } {
  if (given) return { value: given };
  if (!existsSync(file)) {
    writeFileSync(file, randomBytes(32).toString('base64url') + '\n');
    chmodSync(file, 0o600);
  }
  return { value: readFileSync(file, 'utf8').trim(), file };
}

/**
 * `reach up` in the foreground: PostgreSQL and Redis checked (started if installed but
 * stopped), Kafka fetched/formatted/started, the development schema registry when none is
 * configured, the deploy step, then every service, each checked for readiness. Returns the
 * supervisor; the caller stops it on Ctrl-C / SIGTERM.
 */
export async function upStack(env: NodeJS.ProcessEnv, log: Logger = silentLogger): Promise<{ supervisor: Supervisor; state: StackState; p: Paths }> {
  const p = paths(reachHome(env));
  const cfg = loadConfig(
    [
      'kafkaBrokers',
      'schemaRegistryUrl',
      'databaseUrl',
      'redisUrl',
      'httpHost',
      'topicPartitions',
      'topicReplicationFactor',
      'devSchemaRegistryPort',
      ...SERVICES.map((s) => s.port),
    ],
    env,
  );
  const state: StackState = { supervisorPid: process.pid, startedAt: new Date().toISOString(), ready: false, endpoints: {}, processes: [] };
  // eslint-disable-next-line prefer-const
  let save: () => void;
  const supervisor = new Supervisor(
    p.logs,
    (msg) => step(msg),
    () => save(),
  );
  save = () => writeState(p, { ...state, processes: supervisor.pids() });
  save();

  try {
    const pg = hostPort(cfg.databaseUrl, 5432);
    const redis = hostPort(cfg.redisUrl, 6379);
    done(`PostgreSQL ${await ensurePostgres(pg.host, pg.port)} on ${pg.host}:${pg.port}`);
    done(`Redis ${await ensureRedis(redis.host, redis.port)} on ${redis.host}:${redis.port}`);

    const localKafka = !env.REACH_KAFKA_BROKERS;
    if (localKafka) {
      const version = kafkaVersion(p);
      if (await portOpen('127.0.0.1', 9092)) {
        throw new Error(
          'something already listens on 127.0.0.1:9092. Is another `reach up` running (`reach down` stops it)? To use an existing Kafka, set REACH_KAFKA_BROKERS.',
        );
      }
      if (!kafkaFetched(p)) await withProgress(`downloading Apache Kafka ${version} from Maven Central (once)`, fetchKafka(p));
      await formatKafka(p);
      const kafka = createKafka({ brokers: cfg.kafkaBrokers, clientId: 'reach-up', logger: log, connectionTimeoutMs: 1000 });
      const admin = kafka.admin();
      let connected = false;
      await withProgress(
        `Kafka ${version} (KRaft, single node) on 127.0.0.1:9092`,
        supervisor.start({
          name: 'kafka',
          ...kafkaCommand(p),
          env: { ...env },
          readyTimeoutMs: 90_000,
          stopTimeoutMs: 30_000,
          ready: async () => {
            if (!(await portOpen('127.0.0.1', 9092))) return false;
            if (!connected) {
              await admin.connect();
              connected = true;
            }
            const cluster = await admin.describeCluster();
            return cluster.brokers.length > 0 && cluster.controller !== null;
          },
        }),
      );
      await admin.disconnect();
      state.endpoints.kafka = cfg.kafkaBrokers.join(',');
    }

    const childEnv: NodeJS.ProcessEnv = { ...env };
    if (!env.REACH_SCHEMA_REGISTRY_URL) {
      const url = `http://127.0.0.1:${cfg.devSchemaRegistryPort}`;
      await withProgress(
        `development schema registry on ${url}`,
        supervisor.start({
          name: 'schema-registry',
          cmd: process.execPath,
          args: [join(ROOT, 'packages/dev-schema-registry/dist/main.js')],
          env: childEnv,
          readyTimeoutMs: 60_000,
          stopTimeoutMs: 10_000,
          ready: () => httpOk(`${url}/subjects`),
        }),
      );
      childEnv.REACH_SCHEMA_REGISTRY_URL = url;
    }
    state.endpoints['schema-registry'] = childEnv.REACH_SCHEMA_REGISTRY_URL ?? cfg.schemaRegistryUrl;

    await withProgress(
      'deploy step: migrations, topics, schemas',
      setupStack({ ...cfg, schemaRegistryUrl: state.endpoints['schema-registry'] }, log, (msg) => done(msg)),
    );

    // REACH_ADMIN_TOKEN (DESIGN §3) and REACH_TOKEN_SECRET: given, or generated once and kept.
    const admin = localSecret(p.adminToken, env.REACH_ADMIN_TOKEN);
    childEnv.REACH_ADMIN_TOKEN = admin.value;
    if (admin.file) state.adminTokenFile = admin.file;
    childEnv.REACH_TOKEN_SECRET = localSecret(p.tokenSecret, env.REACH_TOKEN_SECRET).value;
    // The router's ReachRules: the given file, else the local one (created empty), edited live.
    childEnv.REACH_RULES_FILE = env.REACH_RULES_FILE ?? localRulesFile(p.rules);
    state.rulesFile = childEnv.REACH_RULES_FILE;

    for (const svc of SERVICES) {
      const port = cfg[svc.port];
      const base = `http://${cfg.httpHost === '0.0.0.0' ? '127.0.0.1' : cfg.httpHost}:${port}`;
      await withProgress(
        `${svc.name} on ${base}`,
        supervisor.start({
          name: svc.name,
          cmd: process.execPath,
          args: ['--enable-source-maps', join(ROOT, 'services', svc.name, 'dist/main.js')],
          env: childEnv,
          readyTimeoutMs: 60_000,
          stopTimeoutMs: 20_000,
          ready: () => httpOk(`${base}/readyz`),
        }),
      );
      state.endpoints[svc.name] = base;
      save();
    }
    state.ready = true;
    save();
    return { supervisor, state, p };
  } catch (err) {
    state.error = (err as Error).message;
    save();
    await supervisor.stopAll();
    throw err;
  }
}

export function clearState(p: Paths): void {
  rmSync(p.state, { force: true });
}
