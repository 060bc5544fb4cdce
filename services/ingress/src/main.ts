import { runService, type ServiceContext } from '@reach/service-kit';
import { Acceptor } from './acceptance.js';
import { Authenticator } from './auth.js';
import { registerMessageApi } from './http-api.js';
import { IdempotencyStore } from './idempotency.js';
import { startKafkaIngress } from './kafka-ingress.js';
import { IngressMetrics } from './metrics.js';
import { ReadModel } from './read-model.js';
import { RecentMessages } from './recent.js';
import { ResultWaiter } from './result-waiter.js';
import { RevocationView } from './revocations.js';

// ingress: validation, auth, idempotency and the public message API (DESIGN §1, §2, §3).
const OPTIONS = ['tokenSecret', 'adminToken', 'idempotencyTtlS', 'maxWaitMs'] as const;
type Key = (typeof OPTIONS)[number];

async function start(ctx: ServiceContext<Key>): Promise<void> {
  const { config } = ctx;
  const revocations = new RevocationView(ctx.pg, ctx.log);
  await revocations.start();
  ctx.onShutdown(() => revocations.stop());

  // `required` below guarantees the secret is set.
  const auth = new Authenticator(config.tokenSecret!, config.adminToken, revocations);
  const idempotency = new IdempotencyStore(ctx.redis, ctx.pg, config.idempotencyTtlS, ctx.log);
  const metrics = new IngressMetrics(ctx.metrics);
  const acceptor = new Acceptor({
    codec: ctx.codec,
    auth,
    idempotency,
    service: ctx.service,
    instance: ctx.instanceId,
    maxPayloadBytes: config.maxPayloadBytes,
    log: ctx.log,
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
    log: ctx.log,
  });
  await startKafkaIngress(ctx, acceptor, metrics);
}

await runService({
  name: 'ingress',
  port: 'ingressPort',
  options: OPTIONS,
  required: ['tokenSecret'],
  postgres: true,
  redis: true,
  // Redis only holds idempotency keys here, and PostgreSQL decides when Redis cannot: a stalled
  // Redis must fall back within a second, not hold every keyed request for the stall.
  redisCommandTimeoutMs: 1_000,
  start,
});
