import { hostname } from 'node:os';
import { readFileSync } from 'node:fs';
import {
  ConfigError,
  processEnv,
  readRawEnv,
  resolveConfig,
  toReachError,
  withDefaults,
  type ConfigOf,
  type Logger,
  type OptionKey,
  type ResolvedConfig,
  type TokenKeys,
} from '@reach/core';
import { SchemaCodec } from '@reach/envelope';
import {
  createKafka,
  createProducer,
  kafkaSecurityFromConfig,
  KAFKA_SECURITY_OPTIONS,
  runStage,
  runBatchStage,
  topicSchemaBindings,
  type FetchWait,
  type InRecord,
  type KafkaSecurity,
  type Kafka,
  type OutRecord,
  type Producer,
  type RunningStage,
  type RunningBatchStage,
  type StageHandlerContext,
} from '@reach/kafka';
import { createPgPool, createRedis, migrate, type Pool, type Redis } from '@reach/store';
import { createTracer, type Tracer } from '@reach/tracing';
import { createLogger } from './logger.js';
import { ServiceMetrics } from './metrics.js';
import { AuthFailureThrottle } from './auth-throttle.js';
import { HttpServer } from './http.js';
import { deadLetterRecord } from './dead-letter.js';
import { takeOverMemberFile } from './member-file.js';
import { serverTlsFromConfig } from './tls.js';
import { loadTokenKeys, watchTokenKeys } from './token-keys.js';

/** Options every service reads. */
const BASE_OPTIONS = [
  'kafkaBrokers',
  'schemaRegistryUrl',
  'logLevel',
  'httpHost',
  'instanceId',
  'shutdownTimeoutMs',
  'memberFile',
  'maxPayloadBytes',
  'otlpEndpoint',
  'authFailureLimit',
  'authFailureWindowS',
  // transport security and token keys (docs/transport-security.md): every service may serve TLS,
  // talk SASL/TLS to Kafka, and verify tokens with the rotated key set
  ...KAFKA_SECURITY_OPTIONS,
  'tlsCert',
  'tlsKey',
  'tlsClientCa',
  'adminToken',
  'tokenSecret',
  'tokenSecrets',
  'tokenSecretsFile',
  'tokenSecretsReloadMs',
] as const;
type BaseKey = (typeof BASE_OPTIONS)[number];

/**
 * What a service may declare it cannot run without: options (no usable default) or
 * `'tokenKeys'`, a signing/verifying key from REACH_TOKEN_SECRETS_FILE, REACH_TOKEN_SECRETS or
 * REACH_TOKEN_SECRET. Unset → exit 78 at start, and the context's types say they are set.
 */
export type Requirement<K extends OptionKey> = K | 'tokenKeys';

/** The config a service's code sees: resolved, with its required options narrowed to set values. */
export type ServiceConfig<K extends OptionKey, R extends Requirement<K> = never> = ResolvedConfig<
  K | BaseKey | 'databaseUrl' | 'redisUrl',
  Extract<R, K | BaseKey | 'databaseUrl' | 'redisUrl'>
>;

export type ServiceDefinition<K extends OptionKey, R extends Requirement<K> = never> = {
  /** ingress, registry, router, dispatcher, retry-scheduler, dead-letter, tracker. */
  name: string;
  /** The option holding this service's HTTP port. */
  port: OptionKey;
  /** Extra options the service reads beyond the base set. */
  options: readonly K[];
  postgres?: boolean;
  redis?: boolean;
  /**
   * Per-command timeout (ms) of ctx.redis; unset: commands wait for Redis. Services whose Redis
   * calls all have a fallback set it so a stalled Redis costs a short delay, not the whole stall.
   */
  redisCommandTimeoutMs?: number;
  start(ctx: ServiceContext<K, R>): Promise<void>;
} & ([R] extends [never]
  ? { required?: readonly [] }
  : {
      /** Among `options` (or 'tokenKeys'): what must be set (see Requirement); their types in ctx are narrowed. */
      required: readonly R[];
    });

export interface StageOptions {
  topics: readonly string[];
  /** Defaults to `reach-<service>`. */
  groupId?: string;
  concurrency?: number;
  partitionsConsumedConcurrently?: number;
  fromBeginning?: boolean;
  /** Each record is handled in a span of this name (when tracing is on); unset: no span. */
  spanName?: string;
  handle: (record: InRecord, ctx: StageHandlerContext) => Promise<readonly OutRecord[]>;
}

export interface BatchStageOptions {
  topics: readonly string[];
  /** Defaults to `reach-<service>`. */
  groupId?: string;
  /** Most records per handler call (default 1000). */
  maxBatch?: number;
  partitionsConsumedConcurrently?: number;
  fromBeginning?: boolean;
  /** Makes the records durable (e.g. one bulk write), returns outputs such as DLQ entries. */
  handleBatch: (records: readonly InRecord[]) => Promise<readonly OutRecord[]>;
  /** Lets the broker gather a batch before answering a fetch (runBatchStage's fetchWait). */
  fetchWait?: FetchWait;
  /** Partition batches consumed at once go to the handler in one call (runBatchStage's together). */
  together?: boolean;
}

export interface ServiceContext<K extends OptionKey, R extends Requirement<K> = never> {
  readonly service: string;
  readonly instanceId: string;
  readonly config: ServiceConfig<K, R>;
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
  readonly http: HttpServer;
  readonly kafka: Kafka;
  readonly producer: Producer;
  readonly codec: SchemaCodec;
  readonly pg: Pool;
  readonly redis: Redis;
  /** Spans over OTLP when REACH_OTLP_ENDPOINT is set; the no-op tracer otherwise. */
  readonly tracer: Tracer;
  /**
   * The keys agent tokens are signed and verified with (REACH_TOKEN_SECRETS[_FILE] and
   * REACH_TOKEN_SECRET); reloaded in place when the file changes. Undefined when none is set,
   * which a service that requires 'tokenKeys' never sees.
   */
  readonly tokenKeys: 'tokenKeys' extends R ? TokenKeys : TokenKeys | undefined;
  /** Runs a consume loop whose poison records go to reach.dlq.v1; stopped first on shutdown. */
  stage(opts: StageOptions): Promise<RunningStage>;
  /** Runs a batch consume loop (see runBatchStage); stopped first on shutdown, like stage(). */
  batchStage(opts: BatchStageOptions): Promise<RunningBatchStage>;
  /** Registers cleanup, run in reverse order after the stages stop. */
  onShutdown(fn: () => Promise<void> | void): void;
  /** Readiness beyond "started": e.g. a local view that has caught up. */
  addReadinessCheck(name: string, check: () => boolean): void;
  /**
   * Logs the error, shuts down and exits with code 70 for a supervised restart: for a part the
   * process cannot live without and cannot repair in place (e.g. a table view's consumer that
   * kafkajs will not restart).
   */
  fatal(err: unknown): void;
}

function readCaFile(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`REACH_CA_FILE=${path} cannot be read: ${(err as Error).message}`);
  }
}

function missing(what: string): never {
  throw new Error(`${what} is not enabled for this service (set it in the service definition)`);
}

/**
 * Starts a service the same way every time: config → logs → metrics/health HTTP → Kafka
 * producer and schema ids → PostgreSQL (migrations) / Redis → the service's own start → ready.
 * SIGTERM/SIGINT stop it gracefully: not ready → consumers stop (committing what was produced)
 * → the service's cleanup → producer flush → connections closed → exit 0.
 */
export async function runService<K extends OptionKey, R extends Requirement<K> = never>(
  def: ServiceDefinition<K, R>,
  env: Readonly<Record<string, string | undefined>> = processEnv(),
): Promise<void> {
  type Key = K | BaseKey | 'databaseUrl' | 'redisUrl';
  let config: ConfigOf<Key>;
  let tokenKeys: TokenKeys | undefined;
  let serverTls: ReturnType<typeof serverTlsFromConfig>;
  let kafkaSecurity: KafkaSecurity;
  let registryTls: { ca?: string };
  let warnings: readonly string[];
  try {
    const keys = [
      ...BASE_OPTIONS,
      ...def.options,
      def.port,
      ...(def.postgres ? (['databaseUrl'] as const) : []),
      ...(def.redis ? (['redisUrl'] as const) : []),
    ] as Key[];
    // raw env → with defaults → resolved (packages/core/src/config.ts)
    const raw = readRawEnv(env);
    warnings = raw.warnings;
    const required = (def.required ?? []) as readonly R[];
    const requiredOptions = required.filter((r): r is Extract<R, Key> => r !== 'tokenKeys');
    config = resolveConfig(withDefaults(keys, raw), requiredOptions, def.name);
    tokenKeys = loadTokenKeys(config);
    if (!tokenKeys && (required as readonly string[]).includes('tokenKeys')) {
      throw new ConfigError(
        'REACH_TOKEN_SECRET is required, or REACH_TOKEN_SECRETS / REACH_TOKEN_SECRETS_FILE (the HMAC keys agent tokens are signed and verified with; `reach up` generates one into .reach/token-secret)',
      );
    }
    serverTls = serverTlsFromConfig(config);
    try {
      kafkaSecurity = kafkaSecurityFromConfig(config);
    } catch (err) {
      throw err instanceof ConfigError ? err : new ConfigError((err as Error).message);
    }
    registryTls = config.caFile ? { ca: readCaFile(config.caFile) } : {};
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${def.name}: ${err.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw err;
  }
  const instanceId = config.instanceId || `${def.name}-${hostname()}-${process.pid}`;
  const log = createLogger({ service: def.name, instance: instanceId, level: config.logLevel });
  for (const warning of warnings) log.warn(warning);
  const metrics = new ServiceMetrics(def.name);
  const http = new HttpServer(log).startingUntilReady();
  const readiness = new Map<string, () => boolean>();
  let started = false;
  let stopping = false;
  const stages: Array<RunningStage | RunningBatchStage> = [];
  const cleanups: Array<() => Promise<void> | void> = [];

  http.route('GET', '/healthz', () => ({ status: 200, body: { status: 'ok', service: def.name, instance: instanceId } }));
  http.route('GET', '/readyz', () => {
    const failing = [...readiness].filter(([, check]) => !check()).map(([name]) => name);
    const ready = started && !stopping && failing.length === 0;
    return {
      status: ready ? 200 : 503,
      body: { ready, service: def.name, instance: instanceId, ...(failing.length ? { waiting_for: failing } : {}), ...(stopping ? { stopping: true } : {}) },
    };
  });
  http.route('GET', '/metrics', async () => ({ status: 200, body: await metrics.registry.metrics(), text: true }));
  // The served routes (issue #13): public like the API they list (docs/design.md §3); the auth matrix
  // test walks every one of them, so a new endpoint cannot go untested.
  http.route('GET', '/v1/routes', () => ({ status: 200, body: { service: def.name, routes: http.routeTable() } }));
  http.throttleAuthFailures(new AuthFailureThrottle({ limit: config.authFailureLimit, windowMs: config.authFailureWindowS * 1000 }), [
    '/healthz',
    '/readyz',
    '/metrics',
  ]);

  const fatal = (err: unknown): void => {
    log.fatal({ err }, 'fatal error; exiting for a supervised restart');
    process.exitCode = 70;
    // Exit explicitly once shut down: a handle left open (a kafkajs reconnect timer, a socket)
    // would otherwise keep a process with a dead consumer alive, and the supervisor would never
    // restart it (seen after a broker restart: dead-letter logged "stopped" and stayed unready).
    void shutdown('fatal').finally(() => process.exit(70));
  };

  let shuttingDown: Promise<void> | undefined;
  const shutdown = (why: string): Promise<void> => {
    shuttingDown ??= (async () => {
      stopping = true;
      log.info({ why }, 'shutting down');
      const timer = setTimeout(() => {
        log.error({ timeoutMs: config.shutdownTimeoutMs }, 'graceful shutdown timed out; exiting');
        process.exit(1);
      }, config.shutdownTimeoutMs);
      timer.unref();
      const step = async (name: string, fn: () => Promise<void> | void) => {
        try {
          await fn();
        } catch (err) {
          log.warn({ err, step: name }, 'shutdown step failed');
        }
      };
      for (const s of stages) await step('stage', () => s.stop());
      for (const fn of cleanups.reverse()) await step('cleanup', fn);
      await step('http', () => http.close());
      log.info('stopped');
      clearTimeout(timer);
    })();
    return shuttingDown;
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM').then(() => process.exit()));
  process.once('SIGINT', () => void shutdown('SIGINT').then(() => process.exit()));
  process.on('unhandledRejection', (err) => fatal(err));

  const port = await http.listen(config.httpHost, (config as Record<string, unknown>)[def.port] as number, { tls: serverTls, adminToken: config.adminToken });
  // port last: tools (and the tests' spawnService) read `"port":N,"msg":"http listening"`
  log.info({ tls: serverTls !== undefined, mutualTlsForAdmin: serverTls?.clientCa !== undefined, port }, 'http listening');
  if (tokenKeys && config.tokenSecretsFile) {
    const reload = watchTokenKeys(tokenKeys, config, log);
    reload.start();
    cleanups.push(() => reload.stop());
  }

  try {
    const tracer = await createTracer({
      endpoint: config.otlpEndpoint,
      service: def.name,
      instanceId,
      onLog: (level, message, err) => (level === 'info' ? log.info(message) : log.warn({ err }, message)),
    });
    // First in, so it runs last: spans of the stages' final records are exported too.
    cleanups.push(() => tracer.shutdown());
    const kafka = createKafka({ brokers: config.kafkaBrokers, clientId: instanceId, logger: log, security: kafkaSecurity });
    const codec = SchemaCodec.connect(config.schemaRegistryUrl, { maxPayloadBytes: config.maxPayloadBytes }, registryTls);
    let pg: Pool | undefined;
    if (def.postgres) {
      pg = createPgPool(config.databaseUrl, { logger: log });
      const pool = pg;
      cleanups.push(() => pool.end());
    }
    let redis: Redis | undefined;
    if (def.redis) {
      // Connects in the background from here on, beside the steps below.
      redis = createRedis(config.redisUrl, log, def.redisCommandTimeoutMs === undefined ? {} : { commandTimeoutMs: def.redisCommandTimeoutMs });
      const client = redis;
      cleanups.push(async () => {
        await client.quit();
      });
    }
    // Independent of each other, so side by side: a restart waits for the slowest of them, not
    // their sum (on a saturated machine each is a round trip to a busy process).
    const [producer] = await Promise.all([
      (async () => {
        if (config.memberFile) await takeOverMemberFile(kafka, config.memberFile, log);
        return createProducer(kafka);
      })(),
      codec.init(topicSchemaBindings()),
      // the read model's partitions are the tracker's (its only writer): it creates and drops them
      pg && migrate(pg, log),
    ]);
    cleanups.push(() => producer.disconnect());

    const stageCounter = metrics.stageRecords;
    const stageSeconds = metrics.stageSeconds;
    const ctx: ServiceContext<K, R> = {
      service: def.name,
      instanceId,
      // resolveConfig checked the required options set: the narrowed type is what it returned
      config: config as ServiceConfig<K, R>,
      log,
      metrics,
      http,
      kafka,
      producer,
      codec,
      tracer,
      tokenKeys: tokenKeys as ServiceContext<K, R>['tokenKeys'],
      get pg() {
        return pg ?? missing('postgres');
      },
      get redis() {
        return redis ?? missing('redis');
      },
      onShutdown: (fn) => cleanups.push(fn),
      addReadinessCheck: (name, check) => readiness.set(name, check),
      fatal,
      stage: async (opts) => {
        const running = await runStage({
          kafka,
          producer,
          logger: log,
          groupId: opts.groupId ?? `reach-${def.name}`,
          topics: opts.topics,
          handle: opts.handle,
          tracer,
          ...(opts.spanName ? { spanName: opts.spanName } : {}),
          ...(opts.concurrency ? { concurrency: opts.concurrency } : {}),
          ...(opts.partitionsConsumedConcurrently ? { partitionsConsumedConcurrently: opts.partitionsConsumedConcurrently } : {}),
          ...(opts.fromBeginning !== undefined ? { fromBeginning: opts.fromBeginning } : {}),
          onPoison: (record, error) => [deadLetterRecord(codec, { service: def.name, error, record })],
          onFatal: fatal,
          onRecord: (outcome, record, ms) => {
            stageCounter.inc({ topic: record.topic, outcome });
            if (outcome === 'poison') metrics.poisonRecords.inc({ topic: record.topic, parked: 'dlq' });
            stageSeconds.observe({ topic: record.topic }, ms / 1000);
          },
        });
        stages.push(running);
        return running;
      },
      batchStage: async (opts) => {
        const running = await runBatchStage({
          kafka,
          producer,
          logger: log,
          groupId: opts.groupId ?? `reach-${def.name}`,
          topics: opts.topics,
          handleBatch: opts.handleBatch,
          ...(opts.maxBatch ? { maxBatch: opts.maxBatch } : {}),
          ...(opts.partitionsConsumedConcurrently ? { partitionsConsumedConcurrently: opts.partitionsConsumedConcurrently } : {}),
          ...(opts.fromBeginning !== undefined ? { fromBeginning: opts.fromBeginning } : {}),
          ...(opts.fetchWait ? { fetchWait: opts.fetchWait } : {}),
          ...(opts.together ? { together: true } : {}),
          onFatal: fatal,
        });
        stages.push(running);
        return running;
      },
    };
    await def.start(ctx);
    started = true;
    http.ready();
    log.info({ port }, 'ready');
  } catch (err) {
    log.fatal({ err: toReachError(err) }, 'start failed');
    process.exitCode = 1;
    await shutdown('start failed');
    process.exit(1);
  }
}
