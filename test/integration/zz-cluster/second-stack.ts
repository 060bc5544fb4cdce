import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { localStack, type TestStack } from '@reach/sdk/testing';
import { reachCli, type CliResult } from '../../helpers/cli.js';

/**
 * A second local stack next to the default one (which other tests and people use and which is
 * never touched here): its own REACH_HOME in a temp dir under .reach/test-stacks/, its own
 * ports (services portBase + 410…420, the schema registry portBase + 1081, Kafka portBase +
 * 2092…, so portBase 17000 gives 17410, 18081, 19092), its own PostgreSQL database and Redis db.
 * Started with `reach up --detach`, stopped with `reach down`, both addressed by REACH_HOME.
 */
export interface SecondStack {
  readonly home: string;
  readonly env: NodeJS.ProcessEnv;
  readonly brokers: string[];
  readonly kafkaPort: number;
  /** The output of `reach up`. */
  readonly up: CliResult;
  readonly sdk: TestStack;
  url(service: 'ingress' | 'registry' | 'dispatcher' | 'tracker' | 'dead-letter' | 'router' | 'retry-scheduler', instance?: number): string;
  adminToken(): string;
  ps(): Promise<PsJson>;
  /** The pid of a process as the supervisor last recorded it (state.json; cheaper than `reach ps`). */
  pid(name: string): number | undefined;
  /** `reach down`; the state dir (logs, broker data) is removed unless `keep` (a failed test's, to read). */
  down(keep?: boolean): Promise<CliResult>;
}

export interface PsJson {
  running: boolean;
  ready?: boolean;
  processes: Array<{ name: string; pid: number; alive: boolean; ready: boolean; restarts: number; endpoint: string }>;
  kafkaNodes?: Array<{ id: number; name: string; address: string }>;
}

const SERVICE_OFFSETS = {
  ingress: 410,
  registry: 411,
  dispatcher: 412,
  tracker: 413,
  'dead-letter': 414,
  router: 415,
  'retry-scheduler': 416,
} as const;

/** The second stack's PostgreSQL database and Redis db (never the default stack's `reach` and db 0). */
export const CLUSTER_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/reach_cluster';
export const CLUSTER_REDIS_URL = 'redis://127.0.0.1:6379/3';

export async function startSecondStack(opts: {
  name: string;
  portBase: number;
  brokers?: number;
  instances?: number;
  extraEnv?: Record<string, string>;
}): Promise<SecondStack> {
  const root = join(process.cwd(), '.reach', 'test-stacks');
  mkdirSync(root, { recursive: true });
  const home = mkdtempSync(join(root, `${opts.name}-`));
  const base = opts.portBase;
  // Nothing of the default stack's REACH_* environment leaks in (REACH_KAFKA_BROKERS would make
  // this stack use the default Kafka).
  const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('REACH_')));
  Object.assign(env, {
    REACH_HOME: home,
    REACH_DATABASE_URL: CLUSTER_DATABASE_URL,
    REACH_REDIS_URL: CLUSTER_REDIS_URL,
    REACH_DEV_SCHEMA_REGISTRY_PORT: String(base + 1081),
    REACH_INGRESS_PORT: String(base + SERVICE_OFFSETS.ingress),
    REACH_REGISTRY_PORT: String(base + SERVICE_OFFSETS.registry),
    REACH_DISPATCHER_PORT: String(base + SERVICE_OFFSETS.dispatcher),
    REACH_TRACKER_PORT: String(base + SERVICE_OFFSETS.tracker),
    REACH_DEAD_LETTER_PORT: String(base + SERVICE_OFFSETS['dead-letter']),
    REACH_ROUTER_PORT: String(base + SERVICE_OFFSETS.router),
    REACH_RETRY_SCHEDULER_PORT: String(base + SERVICE_OFFSETS['retry-scheduler']),
    REACH_CONSOLE_PORT: String(base + 420),
    ...opts.extraEnv,
  });
  const kafkaPort = base + 2092;
  const brokers = Array.from({ length: opts.brokers ?? 1 }, (_, i) => `127.0.0.1:${kafkaPort + i}`);
  const args = ['up', '--detach', '--kafka-port', String(kafkaPort)];
  if (opts.brokers) args.push('--brokers', String(opts.brokers));
  if (opts.instances) args.push('--instances', String(opts.instances));
  const up = await reachCli(args, env, 240_000);
  const stack: SecondStack = {
    home,
    env,
    brokers,
    kafkaPort,
    up,
    sdk: localStack(env),
    url: (service, instance = 1) => `http://127.0.0.1:${base + SERVICE_OFFSETS[service] + 100 * (instance - 1)}`,
    adminToken: () => readFileSync(join(home, 'admin-token'), 'utf8').trim(),
    ps: async () => JSON.parse((await reachCli(['ps', '--json'], env)).stdout) as PsJson,
    pid: (name) => {
      try {
        const state = JSON.parse(readFileSync(join(home, 'state.json'), 'utf8')) as { processes: Array<{ name: string; pid?: number }> };
        return state.processes.find((p) => p.name === name)?.pid;
      } catch {
        return undefined; // being rewritten
      }
    },
    down: async (keep = false) => {
      const res = await reachCli(['down'], env, 180_000);
      if (!keep) rmSync(home, { recursive: true, force: true });
      return res;
    },
  };
  if (up.code !== 0) {
    await stack.down(true);
    throw new Error(`reach up (REACH_HOME=${home}) failed with ${up.code}:\n${up.stderr}\n${up.stdout}`);
  }
  return stack;
}

/** Saves a test's measured figures under test-artifacts/cluster/ (and prints them). */
export function saveFigures(name: string, figures: Record<string, unknown>): void {
  const dir = join(process.cwd(), 'test-artifacts', 'cluster');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${name}.json`), JSON.stringify(figures, null, 2) + '\n');
  console.log(`${name}: ${JSON.stringify(figures)}`);
}
