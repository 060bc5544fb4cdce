import { AuditLog, requireTokenKeys, runService, type ServiceContext } from '@reach/service-kit';
import { createRedis } from '@reach/store';
import { Acceptor } from './acceptance.js';
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
import { RevocationView } from './revocations.js';

// ingress: validation, auth, quotas, idempotency and the public message API (DESIGN §1, §2, §3).
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
] as const;
type Key = (typeof OPTIONS)[number];

/**
 * The quota buckets' own Redis connection: a decision must never wait for a stalled Redis (it
 * falls back to a local bucket instead), so commands fail fast — no offline queue, no retries,
 * a short timeout — unlike the shared client whose idempotency claims wait up to a second.
 */
const QUOTA_REDIS_TIMEOUT_MS = 300;

async function start(ctx: ServiceContext<Key>): Promise<void> {
  const { config } = ctx;
  const revocations = new RevocationView(ctx.pg, ctx.log);
  await revocations.start();
  ctx.onShutdown(() => revocations.stop());

  // `required` below guarantees the secret is set.
  const auth = new Authenticator(requireTokenKeys(ctx.tokenKeys, 'ingress'), config.adminToken, revocations);
  const idempotency = new IdempotencyStore(ctx.redis, ctx.pg, config.idempotencyTtlS, ctx.log);
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
  });
  const readModel = new ReadModel(ctx.pg);
  const waiter = new ResultWaiter((ids) => readModel.messages(ids), ctx.log);
  ctx.onShutdown(() => waiter.close());

  registerMessageApi({
    http: ctx.http,
    producer: ctx.producer,
    acceptor,
    auth,
    idempotency,
    readModel,
    recent: new RecentMessages(),
    waiter,
    metrics,
    service: ctx.service,
    instance: ctx.instanceId,
    maxWaitMs: config.maxWaitMs,
    readPolicy: { sameDomain: config.readsSameDomain },
    log: ctx.log,
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
  required: ['tokenSecret'],
  postgres: true,
  redis: true,
  // ctx.redis holds idempotency keys here, and PostgreSQL decides when Redis cannot: a stalled
  // Redis must fall back within a second, not hold every keyed request for the stall. (Quota
  // buckets use a client of their own with a shorter timeout, see QUOTA_REDIS_TIMEOUT_MS.)
  redisCommandTimeoutMs: 1_000,
  start,
});
