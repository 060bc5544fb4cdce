import { loadConfig } from '@reach/core';
import { budgetPolicyOf, retryPolicyOf, type BudgetPolicy, type RetryPolicy, type RoutingConfig } from '@reach/routing';
import type { RegistryConfig } from './local-registry.js';

/** The REACH_* options the local control plane honours: the registry's, router's and dispatcher's, same names, same defaults. */
const KEYS = [
  'agentTtlS',
  'missedHeartbeats',
  'cooldownQos',
  'maxCapabilities',
  'maxPayloadBytes',
  'weightPriority',
  'weightHealth',
  'weightLoad',
  'weightLocality',
  'routeJitter',
  'region',
  'hotspotCandidates',
  'hotspotTopK',
  'saturation',
  'saturationRetryMs',
  'stickyTtlS',
  'wsReconnectGraceMs',
  'ackTimeoutMs',
  'retryBaseMs',
  'retryMaxMs',
  'maxRetries',
  'retryPolicy',
  'budgetMs',
  'budgetPolicy',
] as const;

export interface LocalConfig {
  registry: RegistryConfig;
  routing: RoutingConfig;
  retry: RetryPolicy;
  budget: BudgetPolicy;
  ackTimeoutMs: number;
  saturationRetryMs: number;
  reconnectGraceMs: number;
  maxPayloadBytes: number;
}

/**
 * The control plane's options from a REACH_* map (the services' own loader: an unknown or
 * invalid variable is refused the same way). `timeScale` multiplies every duration the control
 * plane itself waits — ack timeout, backoff, budgets, holds, reconnect grace — so a test can run
 * the real policy ten or a hundred times faster; an envelope's own timeout_ms and expire_at are
 * the sender's and stay as given.
 */
export function localConfig(env: Readonly<Record<string, string | undefined>>, timeScale: number): LocalConfig {
  if (!(timeScale > 0)) throw new RangeError(`timeScale must be > 0 (got ${timeScale})`);
  const c = loadConfig(KEYS, env);
  const ms = (v: number): number => Math.max(1, Math.round(v * timeScale));
  const retry = retryPolicyOf(c);
  const budget = budgetPolicyOf(c);
  const reconnectGraceMs = c.wsReconnectGraceMs === 0 ? 0 : ms(c.wsReconnectGraceMs);
  return {
    registry: { agentTtlS: c.agentTtlS, missedHeartbeats: c.missedHeartbeats, cooldownQos: c.cooldownQos, maxCapabilities: c.maxCapabilities },
    routing: {
      weightPriority: c.weightPriority,
      weightHealth: c.weightHealth,
      weightLoad: c.weightLoad,
      weightLocality: c.weightLocality,
      jitter: c.routeJitter,
      region: c.region,
      hotspotCandidates: c.hotspotCandidates,
      topK: c.hotspotTopK,
      saturation: c.saturation,
      stickyTtlS: c.stickyTtlS,
      reconnectGraceMs,
    },
    retry: {
      defaults: { ...retry.defaults, baseMs: ms(retry.defaults.baseMs), maxMs: ms(retry.defaults.maxMs) },
      byType: Object.fromEntries(
        Object.entries(retry.byType).map(([type, o]) => [
          type,
          { ...o, ...(o.base_ms !== undefined ? { base_ms: ms(o.base_ms) } : {}), ...(o.max_ms !== undefined ? { max_ms: ms(o.max_ms) } : {}) },
        ]),
      ),
    },
    budget: { defaultMs: ms(budget.defaultMs), byType: Object.fromEntries(Object.entries(budget.byType).map(([type, v]) => [type, ms(v)])) },
    ackTimeoutMs: ms(c.ackTimeoutMs),
    saturationRetryMs: ms(c.saturationRetryMs),
    reconnectGraceMs,
    maxPayloadBytes: c.maxPayloadBytes,
  };
}
