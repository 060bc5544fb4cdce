import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync, rmSync, chmodSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { OPTIONS, loadConfig, redactUrl, silentLogger, type Logger } from '@reach/core';
import { DEFAULT_SCHEMAS_TOPIC } from '@reach/dev-schema-registry';
import { createKafka, defaultMinInsyncReplicas, ensureTopics, kafkaSecurityFromEnv, leaveRecordedMembers } from '@reach/kafka';
import { ROOT, defaultHome, paths, reachHome, type Paths } from '../paths.js';
import { done, step, warn, withProgress } from '../output.js';
import { ensurePostgres, ensureRedis, ensureRedisAppendOnly } from './deps.js';
import {
  fetchKafka,
  formatKafka,
  internalReplication,
  kafkaCommand,
  brokerClassArchive,
  prepareBrokerClassArchive,
  kafkaFetched,
  kafkaLayout,
  kafkaNodes,
  kafkaVersion,
  type KafkaLayout,
  type KafkaNode,
} from './kafka.js';
import { httpOk, portOpen, waitFor } from './net.js';
import { cliTls, serviceScheme } from '../transport.js';
import { setupStack } from './setup.js';
import { Supervisor, type ProcessSpec } from './supervisor.js';

/**
 * The services in start order (producers of the change feeds first). `scalable`: safe to run
 * several instances of (`reach up --instances N`): every stage consumes in a consumer group,
 * and what they share across instances is in Redis/PostgreSQL (leases and the stuck sweep
 * claimed per item or under an advisory lock, dispatcher deliveries forwarded over pub/sub to
 * the instance holding the agent's socket, quota buckets in Redis). The console is a client
 * with one page and one proxy: one instance is enough.
 */
export const SERVICES = [
  { name: 'registry', port: 'registryPort', scalable: true },
  { name: 'tracker', port: 'trackerPort', scalable: true },
  { name: 'dead-letter', port: 'deadLetterPort', scalable: true },
  { name: 'router', port: 'routerPort', scalable: true },
  { name: 'retry-scheduler', port: 'retrySchedulerPort', scalable: true },
  { name: 'dispatcher', port: 'dispatcherPort', scalable: true },
  { name: 'ingress', port: 'ingressPort', scalable: true },
  { name: 'console', port: 'consolePort', scalable: false },
] as const;

/** Largest `reach up --instances`. */
/**
 * Node flags of every service process, for an RSS that stays flat (no leak, and no swings that
 * look like one). The same flags are in deploy/docker/Dockerfile.
 * - The young generation is capped at 16 MB semi-spaces: left to itself, V8 (Node 24) grew it
 *   to 128 MB in a service whose live heap was ~35 MB, and shrank it again after quiet spells,
 *   so RSS swung by ~70 MB (`pnpm soak`, 6 December: ingress 186–252 MB). Not pinned there: a
 *   pinned young generation made the quiet services (registry, console) touch its 32 MB page
 *   by page over half an hour, their RSS creeping 15–23 MB (`pnpm soak`, 7 December).
 * - The old generation may grow 50 % past its live size before a full collection, instead of
 *   V8's dynamic factor (up to 4× on a small heap): at 200 msg/s the router's live ~20 MB of old
 *   generation swung between 18 and 77 MB a minute (promoted Redis client garbage), and its RSS
 *   climbed for 20 minutes (155–222 MB); with the flag it stayed at 158–160 MB for the hour.
 *   Costs a full collection of a ~30 MB heap every few seconds at load, a fraction of a percent
 *   of a core.
 */
export const SERVICE_NODE_FLAGS = ['--enable-source-maps', '--max-semi-space-size=16', '--heap-growing-percent=50'] as const;

/**
 * Added for the quiet services (registry, console, dead-letter): V8's small-heap mode. They
 * allocate a few hundred KB a minute, and with the flags above their old generation grew by
 * V8's minimum step (8 MB, whatever the growing percent) before each full collection, taking
 * ~20 minutes to fill it while every page it touched stayed resident: their RSS rose 10–14 %
 * over a soak's first half hour (old space sampled from `/metrics`, 7 December). With
 * `--optimize-for-size` the step is 2 MB and the young generation small: a test process with
 * ~11 MB live cycled 11 → 20 MB in a 22 MB heap instead of 11 → 29 MB in 61 MB. At their
 * allocation rate the extra collections cost nothing measurable. The same flags are in
 * docker-compose.yml and deploy/k8s for these three.
 */
export const QUIET_SERVICE_NODE_FLAGS = ['--optimize-for-size', '--heap-growing-percent=15'] as const;
export const QUIET_SERVICES: readonly string[] = ['registry', 'console', 'dead-letter'];

/** Node flags, then the service's script: what a service process runs with. */
export function serviceArgs(service: string, script: string): string[] {
  return [...SERVICE_NODE_FLAGS, ...(QUIET_SERVICES.includes(service) ? QUIET_SERVICE_NODE_FLAGS : []), script];
}

export const MAX_INSTANCES = 5;
/** Instance i (1-based) of a service listens on its REACH_*_PORT + 100·(i − 1): 7410, 7510, 7610 … */
export const INSTANCE_PORT_STEP = 100;

/** What `reach up` was asked for beyond the REACH_* environment. */
export interface UpOptions {
  /** Local Kafka nodes (combined broker+controller); default 1. */
  brokers?: number;
  /** Instances of every scalable service; default 1. */
  instances?: number;
  /** Client port of the first local Kafka node; default 9092. */
  kafkaPort?: number;
  /** Controller port of the first local Kafka node; default kafkaPort + brokers. */
  kafkaControllerPort?: number;
}

export interface StackState {
  supervisorPid: number;
  startedAt: string;
  ready: boolean;
  error?: string;
  endpoints: Record<string, string>;
  processes: Array<{ name: string; pid: number | undefined; restarts?: number }>;
  adminTokenFile?: string;
  /** The router's REACH_RULES_FILE. */
  rulesFile?: string;
  /** The options of `reach up` (absent in the state of an older CLI). */
  options?: UpOptions;
  /** The local Kafka nodes (absent when REACH_KAFKA_BROKERS names an outside cluster). */
  kafkaNodes?: Array<{ id: number; name: string; address: string; controller: string }>;
  /** Replication of the Agent-Reach topics, as the deploy step created and checked it. */
  replication?: { replicationFactor: number; minInsyncReplicas: number };
}

/** One process of a service: its name in `reach ps` (`router`, `router-2`, …), port and instance id. */
export interface ServiceInstance {
  service: (typeof SERVICES)[number]['name'];
  name: string;
  index: number;
  port: number;
  portEnv: string;
}

export function serviceInstances(svc: (typeof SERVICES)[number], basePort: number, instances: number): ServiceInstance[] {
  const n = svc.scalable ? instances : 1;
  return Array.from({ length: n }, (_, i) => ({
    service: svc.name,
    name: i === 0 ? svc.name : `${svc.name}-${i + 1}`,
    index: i + 1,
    port: basePort === 0 ? 0 : basePort + INSTANCE_PORT_STEP * i,
    portEnv: OPTIONS[svc.port].env,
  }));
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

/** A port the stack is about to listen on, and who would. */
interface PlannedPort {
  port: number;
  owner: string;
  /** How to move it. */
  knob: string;
}

/** Every planned port must be free (and planned once): names each busy one and how to move it. */
async function checkPorts(planned: readonly PlannedPort[]): Promise<void> {
  const problems: string[] = [];
  const seen = new Map<number, PlannedPort>();
  for (const pp of planned) {
    if (pp.port === 0) continue;
    const other = seen.get(pp.port);
    if (other) problems.push(`port ${pp.port} is planned twice: ${other.owner} (${other.knob}) and ${pp.owner} (${pp.knob})`);
    seen.set(pp.port, pp);
  }
  const busy = await Promise.all([...seen.values()].map(async (pp) => ((await portOpen('127.0.0.1', pp.port)) ? pp : undefined)));
  for (const pp of busy) if (pp) problems.push(`127.0.0.1:${pp.port} (${pp.owner}) is already in use; set ${pp.knob} to move it`);
  if (problems.length > 0) {
    throw new Error(
      `${problems.join('\n  ')}\nIs another \`reach up\` running? \`reach down\` stops the stack of its REACH_HOME (this one: ${reachHome()}); a second stack needs its own REACH_HOME and ports.`,
    );
  }
}

/**
 * `reach up` in the foreground: PostgreSQL and Redis checked (started if installed but
 * stopped), Kafka fetched/formatted/started (one node, or a cluster with `brokers`), the
 * development schema registry when none is configured, the deploy step, then every service
 * (`instances` of each scalable one), each checked for readiness. Returns the supervisor; the
 * caller stops it on Ctrl-C / SIGTERM.
 */
export async function upStack(
  env: NodeJS.ProcessEnv,
  log: Logger = silentLogger,
  opts: UpOptions = {},
): Promise<{ supervisor: Supervisor; state: StackState; p: Paths }> {
  const p = paths(reachHome(env));
  const cfg = loadConfig(
    [
      'kafkaBrokers',
      'schemaRegistryUrl',
      'databaseUrl',
      'redisUrl',
      'httpHost',
      'instanceId',
      'topicPartitions',
      'topicReplicationFactor',
      'devSchemaRegistryPort',
      ...SERVICES.map((s) => s.port),
    ],
    env,
  );
  const instances = opts.instances ?? 1;
  if (!Number.isInteger(instances) || instances < 1 || instances > MAX_INSTANCES)
    throw new Error(`--instances must be 1 … ${MAX_INSTANCES} (got ${instances})`);
  const localKafka = !env.REACH_KAFKA_BROKERS;
  if (!localKafka && (opts.brokers !== undefined || opts.kafkaPort !== undefined || opts.kafkaControllerPort !== undefined)) {
    throw new Error('--brokers / --kafka-port start local Kafka nodes, but REACH_KAFKA_BROKERS names an outside Kafka: unset it or drop the options');
  }
  const layout = kafkaLayout({ brokers: opts.brokers, port: opts.kafkaPort, controllerPort: opts.kafkaControllerPort });
  const internal = internalReplication(layout);
  // Topics: REACH_TOPIC_REPLICATION_FACTOR when given, else what the local cluster affords (≤ 3).
  const replicationFactor = env.REACH_TOPIC_REPLICATION_FACTOR || !localKafka ? cfg.topicReplicationFactor : internal.replicationFactor;
  if (localKafka && replicationFactor > layout.brokers) {
    throw new Error(`REACH_TOPIC_REPLICATION_FACTOR=${replicationFactor} needs at least that many brokers: use --brokers ${replicationFactor}`);
  }
  const minInsyncReplicas = defaultMinInsyncReplicas(replicationFactor);
  const devRegistry = !env.REACH_SCHEMA_REGISTRY_URL;
  const host = cfg.httpHost === '0.0.0.0' ? '127.0.0.1' : cfg.httpHost;
  const plan = SERVICES.map((svc) => ({ svc, instances: serviceInstances(svc, cfg[svc.port], instances) }));

  const state: StackState = {
    supervisorPid: process.pid,
    startedAt: new Date().toISOString(),
    ready: false,
    endpoints: {},
    processes: [],
    options: { brokers: layout.brokers, instances, kafkaPort: layout.port, kafkaControllerPort: layout.controllerPort },
  };
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
    const nodes = localKafka ? kafkaNodes(p, layout) : [];
    await checkPorts([
      ...nodes.flatMap((n) => [
        { port: n.port, owner: `Kafka node ${n.id}`, knob: '--kafka-port' },
        { port: n.controllerPort, owner: `Kafka controller ${n.id}`, knob: '--kafka-controller-port' },
      ]),
      ...(devRegistry ? [{ port: cfg.devSchemaRegistryPort, owner: 'development schema registry', knob: 'REACH_DEV_SCHEMA_REGISTRY_PORT' }] : []),
      ...plan.flatMap(({ instances: list }) =>
        list.map((inst) => ({
          port: inst.port,
          owner: inst.name,
          knob: inst.index === 1 ? inst.portEnv : `${inst.portEnv} (instance ${inst.index}: +${INSTANCE_PORT_STEP * (inst.index - 1)})`,
        })),
      ),
    ]);
    if (p.home !== defaultHome()) {
      const shared = [
        cfg.databaseUrl === OPTIONS.databaseUrl.default ? `PostgreSQL database (REACH_DATABASE_URL)` : '',
        cfg.redisUrl === OPTIONS.redisUrl.default ? `Redis db (REACH_REDIS_URL)` : '',
      ].filter(Boolean);
      if (shared.length > 0)
        warn(`this stack (REACH_HOME=${p.home}) uses the default stack's ${shared.join(' and ')}: set them to keep the two stacks' agents and messages apart`);
    }

    const pg = hostPort(cfg.databaseUrl, 5432);
    const redis = hostPort(cfg.redisUrl, 6379);
    done(`PostgreSQL ${await ensurePostgres(pg.host, pg.port)} on ${pg.host}:${pg.port}`);
    const redisState = await ensureRedis(redis.host, redis.port);
    const appendOnly = await ensureRedisAppendOnly(cfg.redisUrl);
    done(`Redis ${redisState} on ${redis.host}:${redis.port} (append-only file ${appendOnly === 'unknown' ? 'not checked: CONFIG refused' : appendOnly})`);

    const childEnv: NodeJS.ProcessEnv = { ...env };
    let kafkaBrokers = cfg.kafkaBrokers;
    if (localKafka) {
      const version = kafkaVersion(p);
      if (!kafkaFetched(p)) await withProgress(`downloading Apache Kafka ${version} from Maven Central (once)`, fetchKafka(p));
      if (!existsSync(brokerClassArchive(p))) {
        const problem = await withProgress(`the broker's class archive (once, for faster restarts)`, prepareBrokerClassArchive(p));
        if (problem) warn(`no class archive for the broker (it starts ~1 s slower): ${problem}`);
      }
      await formatKafka(p, layout);
      kafkaBrokers = nodes.map((n) => n.address);
      childEnv.REACH_KAFKA_BROKERS = kafkaBrokers.join(',');
      const label =
        layout.brokers === 1
          ? `Kafka ${version} (KRaft, single node) on ${nodes[0]!.address}`
          : `Kafka ${version} (KRaft, ${layout.brokers} broker+controller nodes, ${layout.brokers}-voter quorum) on ${kafkaBrokers.join(', ')}`;
      // The nodes of a cluster start together: none is ready before a quorum of them runs.
      await withProgress(label, Promise.all(nodes.map((node) => supervisor.start(kafkaSpec(p, layout, node, env, log)))));
      await waitFor(`${layout.brokers} registered broker(s)`, () => brokersRegistered(kafkaBrokers, layout.brokers, log), 60_000);
      state.endpoints.kafka = kafkaBrokers.join(',');
      if (layout.brokers > 1) for (const n of nodes) state.endpoints[n.name] = n.address;
      state.kafkaNodes = nodes.map((n) => ({ id: n.id, name: n.name, address: n.address, controller: `${n.host}:${n.controllerPort}` }));
    }

    if (devRegistry) {
      const url = `http://127.0.0.1:${cfg.devSchemaRegistryPort}`;
      // Its state topic is replicated like every other: created here, before the registry
      // would create it with one replica.
      if (localKafka && layout.brokers > 1) await ensureSchemasTopic(kafkaBrokers, internal, log);
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
    const schemaRegistryUrl = childEnv.REACH_SCHEMA_REGISTRY_URL ?? cfg.schemaRegistryUrl;
    const registryCa = caPem(env);
    // state.json, `reach up` and `reach ps` show endpoints: never a registry's basic-auth password.
    state.endpoints['schema-registry'] = redactUrl(schemaRegistryUrl).replace(/\/$/, '');

    await withProgress(
      'deploy step: migrations, topics, schemas',
      setupStack(
        {
          ...cfg,
          kafkaBrokers,
          schemaRegistryUrl,
          // An outside Kafka may want SASL/TLS (REACH_KAFKA_*); the local broker speaks plaintext.
          ...(localKafka ? {} : { kafkaSecurity: kafkaSecurityFromEnv(env) }),
          ...(registryCa ? { registryCa } : {}),
          topicReplicationFactor: replicationFactor,
          minInsyncReplicas,
          // The internal topics of the local Kafka are checked too (their settings come from the broker config).
          internalTopics: localKafka ? { names: [OFFSETS_TOPIC, ...(devRegistry ? [DEFAULT_SCHEMAS_TOPIC] : [])], ...internal } : undefined,
        },
        log,
        (msg) => done(msg),
      ),
    );
    state.replication = { replicationFactor, minInsyncReplicas };

    // REACH_ADMIN_TOKEN (docs/design.md §3) and REACH_TOKEN_SECRET: given, or generated once and kept.
    const admin = localSecret(p.adminToken, env.REACH_ADMIN_TOKEN);
    childEnv.REACH_ADMIN_TOKEN = admin.value;
    if (admin.file) state.adminTokenFile = admin.file;
    childEnv.REACH_TOKEN_SECRET = localSecret(p.tokenSecret, env.REACH_TOKEN_SECRET).value;
    // The router's ReachRules: the given file, else the local one (created empty), edited live.
    childEnv.REACH_RULES_FILE = env.REACH_RULES_FILE ?? localRulesFile(p.rules);
    state.rulesFile = childEnv.REACH_RULES_FILE;

    // A stack serving TLS (REACH_TLS_CERT): readiness over https trusting REACH_CA_FILE, and the
    // children (the console's calls to the services) trust that CA too.
    const scheme = serviceScheme(env);
    const tls = cliTls(env);
    const caFile = loadConfig(['caFile'], env).caFile;
    if (caFile && !childEnv.NODE_EXTRA_CA_CERTS) childEnv.NODE_EXTRA_CA_CERTS = caFile;
    // LeaveGroup for a dead service's members goes over the services' own Kafka settings (SASL/TLS).
    const leaveClient = createKafka({
      brokers: kafkaBrokers,
      clientId: 'reach-supervisor',
      logger: silentLogger, // a failure is reported by the supervisor, once
      connectionTimeoutMs: 1000,
      ...(localKafka ? {} : { security: kafkaSecurityFromEnv(env) }),
    });
    for (const { svc, instances: list } of plan) {
      const several = list.length > 1;
      const bases = list.map((inst) => `${scheme}://${host}:${inst.port}`);
      await withProgress(
        several ? `${list.length} × ${svc.name} on ${bases.join(', ')}` : `${svc.name} on ${bases[0]}`,
        Promise.all(
          list.map((inst, i) => {
            const memberFile = join(p.home, 'run', `${inst.name}.members.json`);
            return supervisor.start({
              name: inst.name,
              cmd: process.execPath,
              args: serviceArgs(svc.name, join(ROOT, 'services', svc.name, 'dist/main.js')),
              env: {
                ...childEnv,
                [inst.portEnv]: String(inst.port),
                REACH_MEMBER_FILE: memberFile,
                // Distinct and stable per instance (and per stack: the port is unique on the host).
                ...(several ? { REACH_INSTANCE_ID: `${cfg.instanceId || svc.name}-${inst.index}-${hostname()}-${inst.port}` } : {}),
              },
              readyTimeoutMs: 60_000,
              stopTimeoutMs: 20_000,
              stopGroup: svc.name,
              ready: () => httpOk(`${bases[i]}/readyz`, tls),
              // Killed without leaving its consumer groups: remove its members now, so the
              // survivors (or its restarted self) get its partitions without a session wait.
              afterExit: async () => {
                const left = await leaveRecordedMembers(memberFile, leaveClient, { deadlineMs: 3_000 });
                return left > 0 ? `left ${left} consumer group${left === 1 ? '' : 's'} for it` : undefined;
              },
            });
          }),
        ),
      );
      list.forEach((inst, i) => (state.endpoints[inst.name] = bases[i]!));
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

/** REACH_CA_FILE's PEM, for an https schema registry with a private CA. */
function caPem(env: NodeJS.ProcessEnv): string | undefined {
  const file = loadConfig(['caFile'], env).caFile;
  return file ? readFileSync(file, 'utf8') : undefined;
}

/** Consumer offsets: created by the broker on first use, with offsets.topic.replication.factor. */
const OFFSETS_TOPIC = '__consumer_offsets';

function kafkaSpec(p: Paths, layout: KafkaLayout, node: KafkaNode, env: NodeJS.ProcessEnv, log: Logger): ProcessSpec {
  const admin = createKafka({ brokers: [node.address], clientId: `reach-up-${node.name}`, logger: log, connectionTimeoutMs: 1000 }).admin();
  let connected = false;
  return {
    name: node.name,
    ...kafkaCommand(p, layout, node),
    env: { ...env },
    readyTimeoutMs: 90_000,
    stopTimeoutMs: 30_000,
    stopGroup: 'kafka',
    // Ready when this node answers and names itself a registered broker under an active controller.
    ready: async () => {
      if (!(await portOpen(node.host, node.port))) return false;
      if (!connected) {
        await admin.connect();
        connected = true;
      }
      const cluster = await admin.describeCluster();
      const ok = cluster.controller !== null && cluster.brokers.some((b) => b.nodeId === node.id);
      if (ok) {
        await admin.disconnect();
        connected = false;
      }
      return ok;
    },
  };
}

async function brokersRegistered(brokers: readonly string[], want: number, log: Logger): Promise<boolean> {
  const admin = createKafka({ brokers, clientId: 'reach-up', logger: log, connectionTimeoutMs: 1000 }).admin();
  await admin.connect();
  try {
    return (await admin.describeCluster()).brokers.length >= want;
  } finally {
    await admin.disconnect();
  }
}

async function ensureSchemasTopic(
  brokers: readonly string[],
  replication: { replicationFactor: number; minInsyncReplicas: number },
  log: Logger,
): Promise<void> {
  const admin = createKafka({ brokers, clientId: 'reach-up', logger: log }).admin();
  await admin.connect();
  try {
    await ensureTopics(admin, {
      partitions: 1,
      ...replication,
      logger: log,
      topics: [
        { name: DEFAULT_SCHEMAS_TOPIC, schema: null, compacted: true, retentionMs: -1, partitions: 1, description: 'development schema registry state' },
      ],
    });
  } finally {
    await admin.disconnect();
  }
}

export function clearState(p: Paths): void {
  rmSync(p.state, { force: true });
}
