import { acceptsNewWork } from '@reach/agents';
import type { AgentRecord, Presence } from '@reach/envelope';
import { produceAll, startTableView, TOPICS, valueSubject } from '@reach/kafka';
import { newerAgentRecord, newerPresence } from '@reach/routing';
import { alertRecord, AuditLog, runService, scheduleRetention, type ServiceContext } from '@reach/service-kit';
import { TablePurger, retentionCheckMs, retentionCutoff } from '@reach/store';
import { registerAdminApi } from './admin-api.js';
import { DeadLetterIngest } from './ingest.js';
import { DeadLetterMetrics } from './metrics.js';
import { Redriver } from './redriver.js';
import { Replayer } from './replayer.js';
import { DeadLetterStore } from './store.js';
import { Sweeper } from './sweeper.js';

// dead-letter: the DLQ store, the stale sweep, redrive on a new capability and the
// replay/purge admin API (docs/design.md §1, §3; R-D11, R-B10). The only writer of dead_letters.
const OPTIONS = ['adminToken', 'tokenSecret', 'dlqStaleAfterS', 'retentionDeadLetters'] as const;
type Key = (typeof OPTIONS)[number];

const AGENTS_SUBJECT = valueSubject(TOPICS.agents.name);
const PRESENCE_SUBJECT = valueSubject(TOPICS.presence.name);

async function start(ctx: ServiceContext<Key>): Promise<void> {
  const { config } = ctx;
  if (!config.adminToken) ctx.log.warn('REACH_ADMIN_TOKEN is not set: the admin API refuses every request and nothing can be replayed');
  const metrics = new DeadLetterMetrics(ctx.metrics);
  const store = new DeadLetterStore(ctx.pg);
  const replayer = new Replayer(store, ctx.producer, config.adminToken, metrics, ctx.log, ctx.tracer);
  const audit = new AuditLog({
    pg: ctx.pg,
    service: ctx.service,
    instance: ctx.instanceId,
    secrets: { adminToken: config.adminToken, tokenSecret: ctx.tokenKeys },
    log: ctx.log,
  });
  registerAdminApi({ http: ctx.http, store, replayer, metrics, adminToken: config.adminToken, tokenSecret: ctx.tokenKeys, log: ctx.log, audit });

  const ingest = new DeadLetterIngest(ctx.codec, store, metrics, ctx.log, ctx.service, ctx.tracer);
  await ctx.batchStage({ topics: [TOPICS.dlq.name], maxBatch: 500, handleBatch: (records) => ingest.handle(records) });

  const redriver = new Redriver(store, replayer, metrics, ctx.log);
  // The same views the routers route from: a parked message is redriven once an agent that
  // can take it is ONLINE and connected (or has an HTTP endpoint).
  const agents = await startTableView<AgentRecord>({
    kafka: ctx.kafka,
    topic: TOPICS.agents.name,
    logger: ctx.log,
    onFatal: ctx.fatal,
    groupPrefix: `reach-${ctx.service}-agents`,
    decode: (value) => ctx.codec.decode<AgentRecord>(AGENTS_SUBJECT, value),
    accept: newerAgentRecord,
    onChange: (key, value) => redriver.onAgentChange(key, value !== null && acceptsNewWork(value)),
  });
  ctx.onShutdown(() => agents.stop());
  const presence = await startTableView<Presence>({
    kafka: ctx.kafka,
    topic: TOPICS.presence.name,
    logger: ctx.log,
    onFatal: ctx.fatal,
    groupPrefix: `reach-${ctx.service}-presence`,
    decode: (value) => ctx.codec.decode<Presence>(PRESENCE_SUBJECT, value),
    accept: newerPresence,
    onChange: (key, value) => redriver.onAgentChange(key, value?.connected === true),
  });
  ctx.onShutdown(() => presence.stop());
  ctx.addReadinessCheck('agents-view', () => agents.caughtUp && presence.caughtUp);
  ctx.onShutdown(() => redriver.stop());
  void Promise.all([agents.ready(), presence.ready()]).then(() => redriver.start({ agents, presence }));

  const sweeper = new Sweeper(store, config.dlqStaleAfterS, metrics, ctx.log, (alert) => produceAll(ctx.producer, [alertRecord(ctx.codec, alert, ctx.log)]));
  sweeper.start();
  ctx.onShutdown(() => sweeper.stop());
  // Dead letters of any status are kept REACH_RETENTION_DEAD_LETTERS from when they were stored.
  const retentionS = config.retentionDeadLetters;
  const deadLetters = new TablePurger(ctx.pg, { table: 'dead_letters', where: 'created_at < $1' });
  scheduleRetention(ctx, retentionCheckMs(retentionS), async () => [{ table: 'dead_letters', rows: await deadLetters.purge(retentionCutoff(retentionS)) }]);
}

await runService({
  name: 'dead-letter',
  port: 'deadLetterPort',
  options: OPTIONS,
  postgres: true,
  start,
});
