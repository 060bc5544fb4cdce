import { randomBytes } from 'node:crypto';
import { CIRCUIT_OPTIONS, CircuitBreakers, CircuitCache, circuitPolicy } from '@reach/circuits';
import type { Envelope } from '@reach/envelope';
import { TOPICS, valueSubject, type InRecord, type StageHandlerContext } from '@reach/kafka';
import { budgetPolicyOf, domainGate, policyOf, readHints, withRuleAction, ruleFactsOf, type RoutingConfig } from '@reach/routing';
import { AlertThrottle, alertRecord, AuditLog, runService, startRegistryViews, type ServiceContext } from '@reach/service-kit';
import { createPgPool, createRedis, type Redis } from '@reach/store';
import { routeWithCircuits } from './circuit-gate.js';
import { KeyedSerializer } from './keyed-serializer.js';
import { routerMetrics } from './metrics.js';
import { decisionRecords, type OutputContext } from './outputs.js';
import { DecisionMemo } from './decision-memo.js';
import { MEMO_WAITS, RedisStickyStore } from './redis-sticky.js';
import { registerViewApi } from './view-api.js';
import { RulesWatcher } from './rules-watcher.js';
import { matchedRule } from './rule-policy.js';
import { registerRulesApi } from './rules-api.js';
import { routeSpanAttributes, routeSpanError } from './route-span.js';
import { LaneBacklogView } from './lane-backlog.js';

/** notify_admin alerts for the same rule and address: at most one per this window. */
const ALERT_WINDOW_MS = 60_000;

const PENDING_SUBJECT = valueSubject(TOPICS.pending.name);

const OPTIONS = [
  'adminToken',
  'tokenSecret',
  'redisUrl',
  'region',
  'weightPriority',
  'weightHealth',
  'weightLoad',
  'weightLocality',
  'routeJitter',
  'hotspotCandidates',
  'hotspotTopK',
  'saturation',
  'saturationRetryMs',
  'stickyTtlS',
  'wsReconnectGraceMs',
  'ackTimeoutMs',
  'budgetMs',
  'budgetPolicy',
  'circuitRefreshMs',
  'rulesFile',
  'databaseUrl',
  ...CIRCUIT_OPTIONS,
] as const;

// router: reach.pending.v1 → reach.routed.v1 (docs/design.md §1): candidate filter, scoring,
// stickiness, saturation hold, fan-out, no-route handling, from local views of the registry.
async function start(ctx: ServiceContext<(typeof OPTIONS)[number]>): Promise<void> {
  const { config, codec } = ctx;
  const metrics = routerMetrics(ctx.metrics);

  const views = await startRegistryViews(ctx.kafka, ctx.codec, ctx.log, `reach-router-view-${randomBytes(3).toString('hex')}`, ctx.fatal);
  ctx.onShutdown(() => views.stop());
  ctx.addReadinessCheck('agents-view', () => views.agents.caughtUp);
  ctx.addReadinessCheck('presence-view', () => views.presence.caughtUp);
  ctx.addReadinessCheck('grants-view', () => views.grantsView.caughtUp);

  // The audit trail's own small pool: the router needs PostgreSQL for nothing else, and a
  // failed audit write must never hold up routing (AuditLog logs it and goes on).
  const auditPg = createPgPool(config.databaseUrl, { max: 2, logger: ctx.log, applicationName: 'reach-router-audit' });
  ctx.onShutdown(() => auditPg.end());
  const secrets = { adminToken: config.adminToken, tokenSecret: ctx.tokenKeys };
  const audit = new AuditLog({ pg: auditPg, service: ctx.service, instance: ctx.instanceId, secrets, log: ctx.log });
  const rules = new RulesWatcher(config.rulesFile || null, ctx.log, (result) => {
    metrics.rulesReloads.inc({ result });
    metrics.rulesLoaded.set(rules.current.rules.length);
    // A changed rules file is an admin action too (whoever edited it): recorded by each router.
    const { digest, rejected } = rules.status();
    void audit.record({
      actor: `router:${ctx.instanceId}`,
      source: null,
      action: 'rules.applied',
      target: config.rulesFile || null,
      request: null,
      status: 0,
      result: result === 'applied' ? 'ok' : 'failed',
      detail: { result, digest, rules: rules.current.rules.length, ...(result === 'applied' ? {} : { diagnostics: rejected?.diagnostics ?? [] }) },
    });
  });
  await rules.start();
  ctx.onShutdown(() => rules.stop());
  metrics.rulesLoaded.set(rules.current.rules.length);

  const sticky = new RedisStickyStore(config.redisUrl, ctx.log);
  ctx.onShutdown(() => sticky.close());

  // Circuits (R-D8, R-D13): a local map of non-CLOSED circuits refreshed from Redis, on a
  // client that fails fast so a Redis outage never holds up routing.
  const circuitRedis = createRedis(config.redisUrl, ctx.log, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeoutMs: 1_000,
    maxReconnectDelayMs: 2_000,
    connectionName: 'reach-router-circuits',
  });
  const circuits = new CircuitCache({
    breakers: new CircuitBreakers(circuitRedis, circuitPolicy(config)),
    instanceId: ctx.instanceId,
    logger: ctx.log,
    refreshMs: config.circuitRefreshMs,
    onSnapshot: (counts) => {
      metrics.circuitOpenAgents.set({ state: 'OPEN' }, counts.OPEN);
      metrics.circuitOpenAgents.set({ state: 'HALF_OPEN' }, counts.HALF_OPEN);
    },
    onTransition: (state) => metrics.circuitTransitions.inc({ state }),
  });
  // The free choice goes to the least queued candidates: deliveries waiting in the dispatcher
  // for a slot, plus what this router just sent (lane-backlog.ts); read on the circuits'
  // fail-fast client.
  const backlog = new LaneBacklogView(circuitRedis, ctx.log);
  backlog.start();
  ctx.onShutdown(async () => {
    await backlog.stop();
    circuits.stop();
    circuitRedis.disconnect();
  });
  registerViewApi(
    ctx.http,
    views.index,
    { adminToken: config.adminToken, tokenSecret: ctx.tokenKeys },
    (agentId) => circuits.verdict(agentId, Date.now()),
    () => [...views.grantsView.entries()].map(([, g]) => g),
  );

  const routing: RoutingConfig = {
    weightPriority: config.weightPriority,
    weightHealth: config.weightHealth,
    weightLoad: config.weightLoad,
    weightLocality: config.weightLocality,
    jitter: config.routeJitter,
    region: config.region,
    hotspotCandidates: config.hotspotCandidates,
    topK: config.hotspotTopK,
    saturation: config.saturation,
    stickyTtlS: config.stickyTtlS,
    reconnectGraceMs: config.wsReconnectGraceMs,
  };
  const deps = {
    index: views.index,
    config: routing,
    sticky,
    rng: Math.random,
    hooks: { domainAllowed: domainGate(views.index, views.grants) },
    backlog: (agentId: string) => backlog.of(agentId),
  };
  const throttle = new AlertThrottle(ALERT_WINDOW_MS);
  const out: OutputContext = {
    codec,
    service: ctx.service,
    instanceId: ctx.instanceId,
    ackTimeoutMs: config.ackTimeoutMs,
    saturationRetryMs: config.saturationRetryMs,
    budget: budgetPolicyOf(config),
    alert: (input) => {
      const suppressed = throttle.admit(`${input.kind}|${input.rule ?? ''}|${input.capability ?? ''}`, Date.now());
      if (suppressed === null) return null;
      return alertRecord(codec, { ...input, labels: { ...input.labels, suppressed_since_last: String(suppressed) } }, ctx.log);
    },
  };
  registerRulesApi(ctx.http, { rules, views, deps, circuits, secrets, audit });

  // Routing from a half-read registry would send everything to NO_ROUTE: consume only once
  // both views hold everything that was in their topics at start.
  await Promise.all([views.agents.ready(), views.presence.ready(), views.grantsView.ready()]);
  ctx.log.info({ agents: views.index.size, presence: views.presence.size }, 'registry views caught up');
  // The first map should hold the circuits already open; with Redis away, routing starts
  // anyway (R-D12) and the map fills in when Redis answers.
  await redisReady(circuitRedis, 2_000);
  await circuits.start();

  const serializer = new KeyedSerializer();
  const memoStore = new RedisStickyStore(config.redisUrl, ctx.log, MEMO_WAITS);
  ctx.onShutdown(() => memoStore.close());
  const memo = new DecisionMemo(memoStore.memo());
  const handle = async (record: InRecord, { span, fresh }: StageHandlerContext) => {
    const received = await codec.decode<Envelope>(PENDING_SUBJECT, record.value);
    const started = performance.now();
    const now = Date.now();
    // First matching ReachRule, in file order (R-B11); its name goes into the timeline.
    const rule = rules.current.match(ruleFactsOf(received, views.index.agent(received.producer)));
    const envelope = withRuleAction(received, rule);
    // A record consumed again (offsets not committed before a crash) goes where it went before.
    const { hints, remembered } = await memo.hintsFor(envelope.message_id, readHints(record.headers, envelope), fresh, Number(record.timestamp));
    const { decision, probes } = await routeWithCircuits(envelope, hints, deps, circuits, now, policyOf(rule));
    await memo.remember(envelope.message_id, hints.attempt, decision, remembered, Number(record.timestamp));
    if (decision.kind === 'routed') backlog.routed(decision.agentId);
    const records = decisionRecords(out, { envelope, hints, record, rule: matchedRule(rule) }, decision, now);
    if (rule) metrics.ruleMatches.inc();
    metrics.routeSeconds.observe((performance.now() - started) / 1000);
    metrics.hopSeconds.observe(Math.max(0, now - Number(record.timestamp)) / 1000);
    metrics.decisions.inc({ outcome: decision.kind });
    metrics.candidates.observe(decision.candidates);
    span.setAttributes(routeSpanAttributes(decision, rule?.name ?? null, hints.attempt, envelope.message_id));
    const failure = routeSpanError(decision, hints.rejectOnSaturation);
    if (failure) span.fail(failure);
    // The message's ids go into each line rather than into a child logger: a child per message
    // cost its bindings' serialisation even when, as for every routed message, nothing is logged.
    const ids = { trace_id: envelope.trace_id, message_id: envelope.message_id, attempt: hints.attempt };
    for (const agentId of probes) ctx.log.info({ ...ids, agent_id: agentId }, 'half-open circuit probe sent');
    if (decision.kind === 'routed') ctx.log.debug({ ...ids, agent_id: decision.agentId, strategy: decision.trace.strategy }, 'routed');
    else if (decision.kind === 'fanout') ctx.log.debug({ ...ids, copies: decision.agentIds.length }, 'fanned out');
    // A saturation hold comes round every REACH_SATURATION_RETRY_MS while it lasts: debug, not info.
    else if (decision.kind === 'saturated' && !hints.rejectOnSaturation) ctx.log.debug({ ...ids, candidates: decision.candidates }, 'held: saturated');
    else ctx.log.info({ ...ids, outcome: decision.kind, ...(decision.kind === 'no_route' ? { why: decision.why } : {}) }, 'not routed');
    return records;
  };

  await ctx.stage({
    topics: [TOPICS.pending.name],
    concurrency: 16,
    spanName: 'route',
    // One session's records share a key: they are routed one after another so that each sees
    // the sticky binding the previous one wrote.
    handle: (record, stageCtx) => serializer.run(record.key?.toString('utf8') ?? `${record.partition}:${record.offset}`, () => handle(record, stageCtx)),
  });
}

/** Resolves when the client is ready or after `ms`, whichever comes first. */
function redisReady(redis: Redis, ms: number): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      redis.off('ready', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    redis.once('ready', done);
  });
}

await runService({
  name: 'router',
  port: 'routerPort',
  options: OPTIONS,
  start,
});
