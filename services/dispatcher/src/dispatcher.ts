import { newId, ReachError, signToken, type Logger, type TokenSecret } from '@reach/core';
import { isNewerRecord } from '@reach/agents';
import type { AgentRecord } from '@reach/envelope';
import { TOPICS, startTableView, valueSubject, type TableView } from '@reach/kafka';
import { startRegistryViews, WakeAlarm, type ServiceContext } from '@reach/service-kit';
import { AgentChannels } from './agent-channels.js';
import { Announcer } from './announcer.js';
import { registerFlowApi } from './flow-api.js';
import { Gateway } from './gateway.js';
import { HttpPusher, type PushJob, type PushOutcome } from './http-push.js';
import { dispatcherMetrics } from './metrics.js';
import { Outbox } from './outbox.js';
import { Outcomes } from './outcomes.js';
import { Promoter } from './promotions.js';
import { SentLedger } from './sent-ledger.js';
import { routedBatchHandler } from './routed-consumer.js';
import { ackWindowOf, DeadlineHolds } from './deadline-holds.js';
import { DeadlineClaims } from './deadlines.js';
import { DeadlineSweeper } from './deadline-sweeper.js';
import { AckJournal } from './ack-journal.js';
import { DispatcherLiveness, rejoinWindowMs } from './liveness.js';
import { Failures } from './failures.js';
import { budgetPolicyOf, retryPolicyOf } from '@reach/routing';
import { ReplayBuffer, keys } from './replay-buffer.js';
import { CircuitRecorder } from './circuit-recorder.js';
import { LaneBacklogReporter } from './lane-backlog.js';
import { CIRCUIT_OPTIONS, CircuitBreakers, CircuitCache, circuitPolicy } from '@reach/circuits';
import { RoutesFeed } from './routes-feed.js';
import { createRedis } from '@reach/store';

export const DISPATCHER_OPTIONS = [
  ...CIRCUIT_OPTIONS,
  'tokenSecret',
  'adminToken',
  'replayTtlS',
  'wsPingIntervalMs',
  'wsIdleTimeoutMs',
  'wsAuthTimeoutMs',
  'wsReconnectGraceMs',
  'ackTimeoutMs',
  'wsMaxFrameBytes',
  'wsMaxBufferedBytes',
  'wsSlowAfterMs',
  'httpPushTimeoutMs',
  'httpPushIdleMs',
  'retryBaseMs',
  'retryMaxMs',
  'maxRetries',
  'retryPolicy',
  'budgetMs',
  'budgetPolicy',
  'deadlineSweepMs',
  'priorityWeights',
  'circuitRefreshMs',
] as const;

type Ctx = ServiceContext<(typeof DISPATCHER_OPTIONS)[number], 'tokenKeys'>;

const AGENTS_SUBJECT = valueSubject(TOPICS.agents.name);
/**
 * How often a subscribed agent's pre-flight view is compared with the registry views even when
 * no feed moved (routes-feed.ts pushes a change at once): for what time alone changes, such as
 * a circuit's open period that ends.
 */
const ROUTES_REFRESH_MS = 250;
/** How long a `send` frame waits for Kafka before the agent hears 5002. */
const SEND_TIMEOUT_MS = 10_000;
/** Lifetime of the token minted for an HTTP-pushed agent's correlated reply. */
const PUSH_REPLY_TOKEN_TTL_S = 300;
/**
 * Records per partition batch, and partitions consumed at once by the routed consumer: all of
 * a fetch's (6 by default), handed to the handler together (one Redis pipeline and one
 * handler run per fetch). With
 * 3 at a time and a call each, a fetch took two rounds of a Redis pipeline per partition, and
 * a record arriving meanwhile waited for all of it (`pnpm bench`, ROUTED → DELIVERING p50
 * 35–48 ms at 1,000 msg/s; 14–16 ms after).
 */
const MAX_BATCH = 500;
const PARTITIONS_AT_ONCE = 6;
/** How long a claimed ack deadline is this instance's before another may claim it again. */
const DEADLINE_CLAIM_LEASE_MS = 30_000;

/**
 * Wires the dispatcher: the agents view (HTTP endpoints, max_concurrency), the replay buffer
 * with its waiting lanes, pub/sub between instances, the WebSocket gateway on the service's
 * HTTP port, HTTP push, and last the reach.routed.v1 consumer — so nothing is consumed before
 * it can be delivered, nor before every agent's cap is known.
 */
export async function startDispatcher(ctx: Ctx): Promise<void> {
  const { config, codec, log } = ctx;
  const tokenSecret = ctx.tokenKeys;
  const metrics = dispatcherMetrics(ctx.metrics);
  const outbox = new Outbox(ctx.producer, log);
  // Its own connection with auto-pipelining: the acks and reads of many sockets issued in one
  // tick go to Redis in one write instead of one syscall each.
  const redis = ctx.redis.duplicate({ enableAutoPipelining: true });
  redis.on('error', (err: Error) => log.debug({ err: { message: err.message } }, 'redis connection error'));
  const agents: TableView<AgentRecord> = await startTableView<AgentRecord>({
    kafka: ctx.kafka,
    topic: TOPICS.agents.name,
    logger: log,
    onFatal: ctx.fatal,
    groupPrefix: 'reach-dispatcher-agents',
    decode: (value) => codec.decode<AgentRecord>(AGENTS_SUBJECT, value),
    accept: isNewerRecord,
  });
  ctx.addReadinessCheck('agents-view', () => agents.caughtUp);
  // The cap is read from the view at every decision: a re-registration applies to the next
  // promotion. An agent the view does not know (deregistered, or not seen yet) is not capped.
  // Rung with every deadline the buffer writes; the deadline sweeper (built later) answers it.
  const deadlineAlarm = new WakeAlarm();
  const buffer = new ReplayBuffer(
    redis,
    config.replayTtlS,
    {
      limitOf: (agent) => agents.get(agent)?.metadata.max_concurrency ?? 0,
      weights: config.priorityWeights,
    },
    deadlineAlarm,
  );
  // Ack deadlines of routed deliveries not sent yet (a batch consumed again after a failure).
  const holds = new DeadlineHolds(buffer, log);
  ctx.onShutdown(() => holds.stop());
  // Outcomes feed the shared circuit breakers on a client that fails fast: breaker accounting
  // must never hold up an ack.
  const circuitRedis = createRedis(config.redisUrl, log, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeoutMs: 1_000,
    connectionName: 'reach-dispatcher-circuits',
  });
  ctx.onShutdown(() => circuitRedis.disconnect());
  const circuits = new CircuitRecorder(new CircuitBreakers(circuitRedis, circuitPolicy(config)), log);
  // Before the Redis client closes (shutdown runs in reverse): the gathered acks go out first.
  ctx.onShutdown(() => circuits.stop());
  // The deliveries this instance sent whose DELIVERING event is still to be produced: with their
  // outcome, or alone once unanswered for a while (sent-ledger.ts).
  const ledger = new SentLedger({ codec, service: ctx.service, instance: ctx.instanceId, outbox, log, metrics });
  const failures = new Failures({
    ledger,
    circuits,
    codec,
    service: ctx.service,
    instance: ctx.instanceId,
    redis,
    retry: retryPolicyOf(config),
    budget: budgetPolicyOf(config),
    metrics,
    log,
    tracer: ctx.tracer,
  });
  // The announcer is created below, with the gateway; promotions only happen once agents answer.
  const promoter = new Promoter({
    ledger,
    metrics,
    log,
    announce: (items) => announcer.announce(items),
  });
  const outcomes = new Outcomes({
    ledger,
    promoted: (promotions) => promoter.handle(promotions),
    circuits,
    failures,
    buffer,
    outbox,
    codec,
    service: ctx.service,
    instance: ctx.instanceId,
    maxPayloadBytes: config.maxPayloadBytes,
    metrics,
    log,
    tracer: ctx.tracer,
  });

  const subscriber = ctx.redis.duplicate();
  subscriber.on('error', (err: Error) => log.debug({ err: { message: err.message } }, 'redis subscriber connection error'));
  // The gateway is created just below; the handlers only run once connections exist.
  const channels = new AgentChannels(
    redis,
    subscriber,
    {
      onDelivery: (agent, entry) => gateway.onDelivery(agent, entry),
      onKick: (agent, gen, connectionId) => gateway.onKick(agent, gen, connectionId),
    },
    log,
  );
  // The pre-flight view agents may subscribe to (R-G6): its registry views and circuit map
  // start with the first subscription, so a dispatcher nobody asks pays nothing for it.
  const routes: RoutesFeed = new RoutesFeed({
    startViews: (onChange) => startRegistryViews(ctx.kafka, codec, log, `reach-dispatcher-routes-${ctx.instanceId}`, ctx.fatal, onChange),
    circuits: new CircuitCache({
      breakers: new CircuitBreakers(circuitRedis, circuitPolicy(config)),
      instanceId: ctx.instanceId,
      logger: log,
      refreshMs: config.circuitRefreshMs,
      // A circuit that opened or closed changes what the watchers can reach: pushed at once.
      onTransition: () => routes.changed(),
    }),
    reconnectGraceMs: config.wsReconnectGraceMs,
    refreshMs: ROUTES_REFRESH_MS,
    log,
  });
  ctx.onShutdown(() => routes.stop());
  const gateway = new Gateway({
    routes,
    authThrottle: ctx.http.authThrottle,
    config: {
      pingIntervalMs: config.wsPingIntervalMs,
      idleTimeoutMs: config.wsIdleTimeoutMs,
      authTimeoutMs: config.wsAuthTimeoutMs,
      maxBufferedBytes: config.wsMaxBufferedBytes,
      slowAfterMs: config.wsSlowAfterMs,
      maxFrameBytes: config.wsMaxFrameBytes,
      reconnectGraceMs: config.wsReconnectGraceMs,
      maxPayloadBytes: config.maxPayloadBytes,
      tokenSecret,
      sendTimeoutMs: SEND_TIMEOUT_MS,
      ackTimeoutMs: config.ackTimeoutMs,
    },
    instanceId: ctx.instanceId,
    buffer,
    channels,
    outcomes,
    outbox,
    codec,
    ledger,
    pg: ctx.pg,
    metrics,
    log,
  });
  gateway.attach(ctx.http.nodeServer!);

  const pusher = new HttpPusher({
    timeoutMs: config.httpPushTimeoutMs,
    idleMs: config.httpPushIdleMs,
    log,
    metrics,
    onOutcome: (job, outcome) => recordPushOutcome(job, outcome, { outcomes, agents, tokenSecret, log }),
    onSent: (job) => {
      if (job.entry !== undefined) ledger.record(job.agent, job.seq, job.entry);
    },
    // An A2A agent still working on a task extends the delivery's ack deadline, as a `progress`
    // frame does; once the entry is gone (answered, failed at its deadline, canceled) polling stops.
    onProgress: async (job) => {
      const extended = await buffer.extendDeadline(job.agent, job.seq, job.messageId, (head) => ackWindowOf(head, config.ackTimeoutMs));
      if (extended === 'extended') return true;
      if (extended === 'mismatch') return false;
      return (await buffer.peek(job.agent, job.seq)) !== undefined;
    },
  });
  const announcer = new Announcer({ localConnection: (agent) => gateway.localConnection(agent), channels, agents, pusher, log });
  registerFlowApi(ctx.http, { buffer, agents, adminToken: config.adminToken, tokenSecret });

  // A claim not settled within this lease is claimed again (e.g. by another instance after a crash).
  const sweeper = new DeadlineSweeper({
    claims: new DeadlineClaims(redis, DEADLINE_CLAIM_LEASE_MS),
    waitClaims: new DeadlineClaims(redis, DEADLINE_CLAIM_LEASE_MS, keys.waitDeadlines),
    promoted: (promotions) => promoter.handle(promotions),
    buffer,
    failures,
    producer: ctx.producer,
    metrics,
    log,
    intervalMs: config.deadlineSweepMs,
    alarm: deadlineAlarm,
  });
  // Before the first sweep: the agents of a dispatcher that died get time to come back and
  // answer — one ack window, or what their reconnect backoff needs after that instance's
  // downtime (liveness.ts, replay-buffer.ts deferDeadlinesTo).
  const liveness = new DispatcherLiveness(redis, ctx.instanceId, log);
  const downMs = await liveness.sinceLastAlive();
  liveness.start();
  const rejoinMs = rejoinWindowMs(config.ackTimeoutMs, downMs);
  const deferred = await buffer.deferDeadlinesTo(Date.now() + rejoinMs);
  if (deferred > 0 || downMs !== undefined) {
    log.info({ deliveries: deferred, ms: rejoinMs, dispatcher_down_ms: downMs ?? null }, 'ack deadlines deferred at start: agents reconnect and answer first');
  }
  sweeper.start();
  const journal = new AckJournal({ redis, buffer, outcomes, producer: ctx.producer, log });
  journal.start();

  ctx.onShutdown(async () => {
    await sweeper.stop();
    await journal.stop();
    gateway.close();
    await pusher.close();
    await gateway.drain();
    await ledger.flush();
    await outbox.drain();
    await liveness.stop();
    await subscriber.quit().catch(() => undefined);
    await redis.quit().catch(() => undefined);
    await agents.stop();
  });

  // Which agents have deliveries waiting for a slot, for the routers (lane-backlog.ts).
  const backlog = new LaneBacklogReporter(buffer, redis, log);
  backlog.start();
  ctx.onShutdown(() => backlog.stop());
  // The agents view catches up while the consumer joins its group (side by side: a restart
  // waits for the slower of the two, not both). A batch waits for the view, in which an agent
  // not seen yet would count as uncapped; readiness waits for it as before.
  const viewReady = agents.ready();
  const handleRouted = routedBatchHandler({
    service: ctx.service,
    instanceId: ctx.instanceId,
    replayTtlS: config.replayTtlS,
    codec,
    producer: ctx.producer,
    buffer,
    promoter,
    announce: (items) => announcer.announce(items),
    metrics,
    log,
    tracer: ctx.tracer,
    holds,
    backlog,
    failures,
  });
  await ctx.batchStage({
    topics: [TOPICS.routed.name],
    maxBatch: MAX_BATCH,
    partitionsConsumedConcurrently: PARTITIONS_AT_ONCE,
    together: true,
    handleBatch: async (records) => {
      await viewReady;
      return handleRouted(records);
    },
  });
  await viewReady;
}

/**
 * An HTTP push answer, recorded like the same answer over a WebSocket. A pushed agent holds no
 * connection token for its correlated reply, so the dispatcher (which shares the signing
 * secret with the registry) mints a short-lived one for that agent.
 */
async function recordPushOutcome(
  job: PushJob,
  outcome: PushOutcome,
  d: { outcomes: Outcomes; agents: TableView<AgentRecord>; tokenSecret: TokenSecret; log: Logger },
): Promise<void> {
  switch (outcome.kind) {
    case 'ack':
      if (outcome.result) {
        const now = Math.floor(Date.now() / 1000);
        const token = signToken(
          { sub: job.agent, jti: newId('tok'), iat: now, exp: now + PUSH_REPLY_TOKEN_TTL_S, dom: d.agents.get(job.agent)?.metadata.domain ?? 'default' },
          d.tokenSecret,
        );
        try {
          await d.outcomes.result(
            job.agent,
            token,
            { message_id: job.messageId, ...outcome.result, ...(outcome.a2aTaskId ? { a2a_task_id: outcome.a2aTaskId } : {}) },
            job.seq,
          );
        } catch (err) {
          // A refused result (4101, 4102) settled the delivery as a final refusal; it was logged.
          if (!(err instanceof ReachError) || err.retryable) throw err;
        }
      } else await d.outcomes.ack(job.agent, job.seq, job.messageId);
      return;
    case 'reject':
      await d.outcomes.reject(job.agent, job.seq, job.messageId, { code: outcome.code, reason: outcome.reason, retryable: undefined });
      return;
    case 'failure':
      return; // stays DELIVERING and buffered; retries come with ack deadlines
  }
}
