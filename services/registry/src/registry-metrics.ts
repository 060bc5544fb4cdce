import { Gauge, type Counter } from 'prom-client';
import { AgentStatusValues } from '@reach/envelope';
import type { ServiceMetrics } from '@reach/service-kit';
import type { AgentStore } from './agent-store.js';

/** reach_registry_* metrics (DESIGN §8); labels are bounded: never an agent id. */
export interface RegistryMetrics {
  registrations: Counter<'outcome'>;
  heartbeats: Counter<'status'>;
  offlineTransitions: Counter;
  cooldownTransitions: Counter;
  deregistrations: Counter;
  purges: Counter;
  feedRecords: Counter<'kind'>;
}

export function registryMetrics(metrics: ServiceMetrics, store: AgentStore): RegistryMetrics {
  // Counted from Redis when scraped, so every instance reports the shared truth.
  new Gauge({
    name: `${metrics.prefix}agents`,
    help: 'Registered agents by status (from Redis, at scrape time).',
    labelNames: ['status'],
    registers: [metrics.registry],
    async collect() {
      const counts = new Map<string, number>(AgentStatusValues.map((s) => [s, 0]));
      try {
        for (const s of await store.statuses()) counts.set(s, (counts.get(s) ?? 0) + 1);
      } catch {
        return; // Redis away: leave the gauge at its last value rather than fail the scrape
      }
      for (const [status, n] of counts) this.set({ status }, n);
    },
  });
  return {
    registrations: metrics.counter('registrations_total', 'Accepted registrations: new agents and re-registrations that replaced a record.', ['outcome']),
    heartbeats: metrics.counter('heartbeats_total', 'Accepted heartbeats, by the status they left the agent in.', ['status']),
    offlineTransitions: metrics.counter('offline_transitions_total', 'Agents marked OFFLINE after missing their heartbeats (by this instance).'),
    cooldownTransitions: metrics.counter('cooldown_transitions_total', 'Heartbeats that moved an agent into COOLDOWN (QoS below REACH_COOLDOWN_QOS).'),
    deregistrations: metrics.counter('deregistrations_total', 'Agents removed by DELETE /v1/agents/{id}.'),
    purges: metrics.counter('purged_agents_total', 'OFFLINE agents removed after the retention period (by this instance).'),
    feedRecords: metrics.counter('feed_records_total', 'Records produced to reach.agents.v1 (record or tombstone).', ['kind']),
  };
}
