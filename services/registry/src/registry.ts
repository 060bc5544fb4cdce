import { ConfigError } from '@reach/core';
import { parseCapabilityDictionary } from '@reach/agents';
import type { ServiceContext } from '@reach/service-kit';
import { AgentStore } from './agent-store.js';
import { AgentFeed } from './agent-feed.js';
import { mountAgentApi } from './agent-api.js';
import { startLeaseSweeper } from './lease-sweeper.js';
import { registryMetrics } from './registry-metrics.js';

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
] as const;

type RegistryOption = (typeof REGISTRY_OPTIONS)[number];

/** Leases are checked this often: an agent goes OFFLINE within a second of its deadline. */
const SWEEP_INTERVAL_MS = 1000;
/** An OFFLINE agent stays listed (and in its capability index) this long, then is purged. */
const OFFLINE_RETENTION_MS = 3600_000;
const PUBLISH_TIMEOUT_MS = 10_000;

export async function startRegistry(ctx: ServiceContext<RegistryOption>): Promise<void> {
  const { config, redis, log } = ctx;
  const tokenSecret = config.tokenSecret;
  if (!tokenSecret) throw new ConfigError('REACH_TOKEN_SECRET is required by the registry (it signs agent tokens)');

  const store = new AgentStore(redis);
  const metrics = registryMetrics(ctx.metrics, store);
  const feed = new AgentFeed(store, ctx.producer, ctx.codec, log, (records, tombstones) => {
    metrics.feedRecords.inc({ kind: 'record' }, records);
    metrics.feedRecords.inc({ kind: 'tombstone' }, tombstones);
  });
  mountAgentApi(ctx.http, {
    store,
    feed,
    log,
    metrics,
    config: {
      secrets: { tokenSecret, adminToken: config.adminToken, enrollmentToken: config.enrollmentToken },
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
  const sweeper = startLeaseSweeper({ store, feed, log, metrics, intervalMs: SWEEP_INTERVAL_MS, offlineRetentionMs: OFFLINE_RETENTION_MS });
  ctx.onShutdown(() => feed.stop());
  ctx.onShutdown(() => sweeper.stop());
  ctx.addReadinessCheck('redis', () => redis.status === 'ready');
  log.info(
    { enrollment: config.enrollmentToken !== undefined, dictionary: config.capabilityDictionary !== '', missedHeartbeats: config.missedHeartbeats },
    'registry API mounted',
  );
}
