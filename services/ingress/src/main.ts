import { readFileSync } from 'node:fs';
import { acceptsNewWork } from '@reach/agents';
import type { AgentRecord } from '@reach/envelope';
import { startTableView, TOPICS, valueSubject } from '@reach/kafka';
import { AuditLog, RevokedTokenView, runService, scheduleRetention, type ServiceContext } from '@reach/service-kit';
import { createRedis, TablePurger } from '@reach/store';
import { Acceptor } from './acceptance.js';
import { registerA2aApi } from './a2a-api.js';
import { A2aReadModel } from './a2a-read.js';
import { CancelMarks } from './cancel-mark.js';
import { ReplayChains } from './replay-chain.js';
import { Authenticator } from './auth.js';
import { registerMessageApi } from './http-api.js';
import { IdempotencyStore } from './idempotency.js';
import { startKafkaIngress } from './kafka-ingress.js';
import { IngressMetrics } from './metrics.js';
import { registerQuotaApi } from './quota-api.js';
import { QuotaBuckets } from './quota-buckets.js';
import { QuotaOverrides } from './quota-overrides.js';
import { Quotas } from './quotas.js';
import { ReadModel } from './read-model.js';
import { RecentMessages } from './recent.js';
import { ResultWaiter } from './result-waiter.js';

// ingress: validation, auth, quotas, idempotency and the public message API (docs/design.md §1, §2, §3).
const OPTIONS = [
  'tokenSecret',
  'adminToken',
  'idempotencyTtlS',
  'maxWaitMs',
  'quotaDefaultRate',
  'quotaDefaultBurst',
  'quotaRefreshMs',
  'readsSameDomain',
  'dlqFloodSample',
  'a2aPublicUrl',
  'a2aStreamMaxMs',
] as const;
type Key = (typeof OPTIONS)[number];

/**
 * The quota buckets' own Redis connection: a decision must never wait for a stalled Redis (it
 * falls back to a local bucket instead), so commands fail fast — no offline queue, no retries,
 * a short timeout — unlike the shared client whose idempotency claims wait up to a second.
 */
const QUOTA_REDIS_TIMEOUT_MS = 300;
/** Expired rows of idempotency_keys are looked for this often (keys live 5 min … 30 days). */
const IDEMPOTENCY_PURGE_MS = 60_000;

/** The version the Agent Cards carry: this service's package version. */
function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: string };
  return pkg.version ?? '0.0.0';
}

async function start(ctx: ServiceContext<Key, 'tokenKeys'>): Promise<void> {
  const { config } = ctx;
  const revocations = new RevokedTokenView(ctx.pg, ctx.log);
  await revocations.start();
  ctx.onShutdown(() => revocations.stop());

  // `required` below guarantees a token key is set.
  const auth = new Authenticator(ctx.tokenKeys, config.adminToken, revocations);
  const idempotency = new IdempotencyStore(ctx.redis, ctx.pg, config.idempotencyTtlS, ctx.log);
  // Expired durable idempotency keys are deleted in batches (a writer may also take one over).
  const idempotencyKeys = new TablePurger(ctx.pg, { table: 'idempotency_keys', where: 'expires_at < $1' });
  scheduleRetention(ctx, IDEMPOTENCY_PURGE_MS, async () => [{ table: 'idempotency_keys', rows: await idempotencyKeys.purge(new Date()) }]);
  const metrics = new IngressMetrics(ctx.metrics);

  const overrides = new QuotaOverrides(ctx.pg, { ratePerS: config.quotaDefaultRate, burst: config.quotaDefaultBurst }, ctx.log, config.quotaRefreshMs);
  await overrides.start();
  ctx.onShutdown(() => overrides.stop());
  ctx.addReadinessCheck('quota-overrides', () => overrides.ready);
  const quotaRedis = createRedis(config.redisUrl, ctx.log, {
    commandTimeoutMs: QUOTA_REDIS_TIMEOUT_MS,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectionName: `${ctx.instanceId}:quotas`,
    // one token-bucket script per message, from 16 concurrent handlers: one write per turn
    autoPipelining: true,
  });
  ctx.onShutdown(async () => {
    await quotaRedis.quit().catch(() => quotaRedis.disconnect());
  });
  const buckets = new QuotaBuckets(quotaRedis, ctx.log, metrics.bucketEvents);
  const quotas = new Quotas(overrides, buckets, (producer, key) => idempotency.holder(producer, key));

  const acceptor = new Acceptor({
    codec: ctx.codec,
    auth,
    idempotency,
    quotas,
    service: ctx.service,
    instance: ctx.instanceId,
    maxPayloadBytes: config.maxPayloadBytes,
    log: ctx.log,
    tracer: ctx.tracer,
    replayChains: new ReplayChains(ctx.redis),
  });
  const readModel = new ReadModel(ctx.pg);
  const recent = new RecentMessages();
  const waiter = new ResultWaiter((ids) => readModel.messages(ids), ctx.log);
  ctx.onShutdown(() => waiter.close());

  registerMessageApi({
    http: ctx.http,
    producer: ctx.producer,
    acceptor,
    auth,
    idempotency,
    readModel,
    recent,
    waiter,
    metrics,
    service: ctx.service,
    instance: ctx.instanceId,
    maxWaitMs: config.maxWaitMs,
    readPolicy: { sameDomain: config.readsSameDomain },
    log: ctx.log,
  });
  // The A2A bridge (docs/a2a.md): its Agent Cards list the capabilities of the live registry view.
  const agents = await startTableView<AgentRecord>({
    kafka: ctx.kafka,
    topic: TOPICS.agents.name,
    logger: ctx.log,
    onFatal: ctx.fatal,
    groupPrefix: `reach-${ctx.service}-agents`,
    decode: (value) => ctx.codec.decode<AgentRecord>(valueSubject(TOPICS.agents.name), value),
    accept: (incoming, current) => current === undefined || incoming.revision >= current.revision,
  });
  ctx.onShutdown(() => agents.stop());
  let stopStreams: () => void = () => undefined;
  const closing = new Promise<void>((resolve) => (stopStreams = resolve));
  ctx.onShutdown(() => stopStreams());
  registerA2aApi({
    http: ctx.http,
    producer: ctx.producer,
    codec: ctx.codec,
    acceptor,
    auth,
    idempotency,
    cancels: new CancelMarks(ctx.redis),
    read: new A2aReadModel(ctx.pg),
    recent,
    waiter,
    metrics,
    agents: () => [...agents.entries()].map(([, record]) => record),
    isLive: (record) => acceptsNewWork(record),
    service: ctx.service,
    instance: ctx.instanceId,
    maxWaitMs: config.maxWaitMs,
    streamMaxMs: config.a2aStreamMaxMs,
    publicUrl: config.a2aPublicUrl,
    version: packageVersion(),
    log: ctx.log,
    closing,
  });
  const secrets = { adminToken: config.adminToken, tokenSecret: ctx.tokenKeys };
  const audit = new AuditLog({ pg: ctx.pg, service: ctx.service, instance: ctx.instanceId, secrets, log: ctx.log });
  registerQuotaApi({ http: ctx.http, secrets, overrides, instance: ctx.instanceId, audit });
  await startKafkaIngress(ctx, acceptor, metrics, config.dlqFloodSample);
}

await runService({
  name: 'ingress',
  port: 'ingressPort',
  options: OPTIONS,
  // any source of token keys: REACH_TOKEN_SECRET, or the ring of REACH_TOKEN_SECRETS[_FILE]
  required: ['tokenKeys'],
  postgres: true,
  redis: true,
  // ctx.redis holds idempotency keys here, and PostgreSQL decides when Redis cannot: a stalled
  // Redis must fall back within a second, not hold every keyed request for the stall. (Quota
  // buckets use a client of their own with a shorter timeout, see QUOTA_REDIS_TIMEOUT_MS.)
  redisCommandTimeoutMs: 1_000,
  start,
});
