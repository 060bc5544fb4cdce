import { parseCapabilityDictionary } from '@reach/agents';
import { AuditLog, PeriodicJob, RevokedTokenView, scheduleRetention, type ServiceContext } from '@reach/service-kit';
import { TablePurger, retentionCheckMs, retentionCutoff } from '@reach/store';
import { mountAuditApi } from './audit-api.js';
import { AgentStore } from './agent-store.js';
import { AgentFeed } from './agent-feed.js';
import { mountAgentApi } from './agent-api.js';
import { startLeaseSweeper } from './lease-sweeper.js';
import { startA2aProber } from './a2a-prober.js';
import { registryMetrics } from './registry-metrics.js';
import { GrantStore } from './grant-store.js';
import { GrantFeed } from './grant-feed.js';
import { mountGrantApi } from './grant-api.js';
import { TokenStore } from './token-store.js';
import { mountTokenApi } from './token-api.js';

export const REGISTRY_OPTIONS = [
  'tokenSecret',
  'tokenTtlS',
  'enrollmentToken',
  'adminToken',
  'agentTtlS',
  'missedHeartbeats',
  'cooldownQos',
  'maxCapabilities',
  'capabilityDictionary',
  'retentionAudit',
  'a2aProbeMs',
] as const;

type RegistryOption = (typeof REGISTRY_OPTIONS)[number];

/** Leases are checked this often: an agent goes OFFLINE within a second of its deadline. */
const SWEEP_INTERVAL_MS = 1000;
/** An OFFLINE agent stays listed (and in its capability index) this long, then is purged. */
const OFFLINE_RETENTION_MS = 3600_000;
const PUBLISH_TIMEOUT_MS = 10_000;
/** Issued and revoked token rows are kept this long past their expiry, then purged, this often. */
const TOKEN_PURGE_GRACE_S = 3600;
const TOKEN_PURGE_INTERVAL_MS = 10 * 60_000;
/** A failed start-up reconcile of reach.grants.v1 is tried again after this long. */
const RECONCILE_RETRY_MS = 5000;

export async function startRegistry(ctx: ServiceContext<RegistryOption, 'tokenKeys'>): Promise<void> {
  const { config, redis, log } = ctx;
  const tokenSecret = ctx.tokenKeys;

  const store = new AgentStore(redis);
  const tokens = new TokenStore(ctx.pg);
  // Revoked tokens can neither heartbeat nor re-register their agent, nor use the admin API.
  const revoked = new RevokedTokenView(ctx.pg, log);
  await revoked.start();
  ctx.onShutdown(() => revoked.stop());
  const secrets = { tokenSecret, adminToken: config.adminToken, enrollmentToken: config.enrollmentToken };
  const metrics = registryMetrics(ctx.metrics, store);
  const feed = new AgentFeed(store, ctx.producer, ctx.codec, log, (records, tombstones) => {
    metrics.feedRecords.inc({ kind: 'record' }, records);
    metrics.feedRecords.inc({ kind: 'tombstone' }, tombstones);
  });
  const grants = new GrantStore(ctx.pg);
  const audit = new AuditLog({ pg: ctx.pg, service: ctx.service, instance: ctx.instanceId, secrets, log });
  mountAgentApi(ctx.http, {
    store,
    audit,
    grantsFrom: (domain) => grants.list({ from_domain: domain }),
    feed,
    log,
    metrics,
    tokens,
    revoked,
    config: {
      secrets,
      tokenTtlS: config.tokenTtlS,
      missedHeartbeats: config.missedHeartbeats,
      cooldownQos: config.cooldownQos,
      rules: {
        maxCapabilities: config.maxCapabilities,
        dictionary: parseCapabilityDictionary(config.capabilityDictionary),
        defaultTtlS: config.agentTtlS,
      },
      publishTimeoutMs: PUBLISH_TIMEOUT_MS,
    },
  });
  mountTokenApi(ctx.http, { tokens, revoked, log, secrets, audit });
  mountAuditApi(ctx.http, { pg: ctx.pg, secrets, isRevoked: (jti) => revoked.has(jti) });
  const grantFeed = new GrantFeed(grants, ctx.kafka, ctx.producer, ctx.codec, log);
  mountGrantApi(ctx.http, { store: grants, feed: grantFeed, log, secrets, isRevoked: (jti) => revoked.has(jti), publishTimeoutMs: PUBLISH_TIMEOUT_MS, audit });
  ctx.onShutdown(() => grantFeed.stop());
  reconcileGrants(grantFeed, log);
  const purge = new PeriodicJob('token purge', TOKEN_PURGE_INTERVAL_MS, () => tokens.purgeExpired(TOKEN_PURGE_GRACE_S), log);
  purge.start();
  ctx.onShutdown(() => purge.stop());
  // The audit trail is written by every service that serves an admin action and read here
  // (GET /v1/audit): the registry bounds it to REACH_RETENTION_AUDIT.
  const auditRetentionS = ctx.config.retentionAudit;
  const auditLog = new TablePurger(ctx.pg, { table: 'audit_log', where: 'at < $1' });
  scheduleRetention(ctx, retentionCheckMs(auditRetentionS), async () => [{ table: 'audit_log', rows: await auditLog.purge(retentionCutoff(auditRetentionS)) }]);
  const sweeper = startLeaseSweeper({ store, feed, log, metrics, intervalMs: SWEEP_INTERVAL_MS, offlineRetentionMs: OFFLINE_RETENTION_MS });
  ctx.onShutdown(() => feed.stop());
  ctx.onShutdown(() => sweeper.stop());
  const prober = startA2aProber({
    store,
    feed,
    redis,
    log,
    metrics,
    intervalMs: config.a2aProbeMs,
    missedHeartbeats: config.missedHeartbeats,
    cooldownQos: config.cooldownQos,
    timeoutMs: Math.min(5000, config.a2aProbeMs),
  });
  ctx.onShutdown(() => prober.stop());
  ctx.addReadinessCheck('redis', () => redis.status === 'ready');
  log.info(
    { enrollment: config.enrollmentToken !== undefined, dictionary: config.capabilityDictionary !== '', missedHeartbeats: config.missedHeartbeats },
    'registry API mounted',
  );
}

/**
 * reach.grants.v1 is made equal to PostgreSQL at start (every grant published again, stale ids
 * tombstoned), in the background: the topic already holds what routers need, so the API does
 * not wait. Retried until it succeeds.
 */
function reconcileGrants(feed: GrantFeed, log: ServiceContext<RegistryOption>['log']): void {
  const attempt = (): void => {
    feed.reconcile().then(
      (r) => log.info(r, 'grants reconciled: reach.grants.v1 equals PostgreSQL'),
      (err: unknown) => {
        log.warn({ err }, 'could not reconcile grants; trying again');
        if (!feed.isStopped) setTimeout(attempt, RECONCILE_RETRY_MS).unref();
      },
    );
  };
  attempt();
}
