import { Gauge, type Counter } from 'prom-client';
import { AgentStatusValues, type AgentRecord } from '@reach/envelope';
import { capabilityStats } from '@reach/agents';
import type { ServiceMetrics } from '@reach/service-kit';
import type { AgentStore } from './agent-store.js';

/** reach_registry_* metrics (docs/design.md §8); labels are bounded: never an agent id. */
export interface RegistryMetrics {
  registrations: Counter<'outcome'>;
  heartbeats: Counter<'status'>;
  offlineTransitions: Counter;
  a2aProbes: Counter<'outcome'>;
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
  capabilityGauges(metrics, store);
  return {
    registrations: metrics.counter('registrations_total', 'Accepted registrations: new agents and re-registrations that replaced a record.', ['outcome']),
    heartbeats: metrics.counter('heartbeats_total', 'Accepted heartbeats, by the status they left the agent in.', ['status']),
    offlineTransitions: metrics.counter('offline_transitions_total', 'Agents marked OFFLINE after missing their heartbeats (by this instance).'),
    a2aProbes: metrics.counter('a2a_probes_total', 'Probes of A2A agents by this instance (docs/a2a.md): alive renews the lease, dead does not.', ['outcome']),
    cooldownTransitions: metrics.counter('cooldown_transitions_total', 'Heartbeats that moved an agent into COOLDOWN (QoS below REACH_COOLDOWN_QOS).'),
    deregistrations: metrics.counter('deregistrations_total', 'Agents removed by DELETE /v1/agents/{id}.'),
    purges: metrics.counter('purged_agents_total', 'OFFLINE agents removed after the retention period (by this instance).'),
    feedRecords: metrics.counter('feed_records_total', 'Records produced to reach.agents.v1 (record or tombstone).', ['kind']),
  };
}

/** Capabilities with a row of their own in the per-capability gauges; the rest are `_other`. */
const TOP_CAPABILITIES = 50;

/**
 * Fleet load and QoS by capability, read from Redis at scrape time (one read of every record
 * serves all three gauges): agents by status, mean load rate, min and mean QoS of ONLINE agents.
 * Never an agent id as a label; at most TOP_CAPABILITIES + 1 capability values.
 */
function capabilityGauges(metrics: ServiceMetrics, store: AgentStore): void {
  let snapshot: Promise<AgentRecord[]> | undefined;
  // prom-client collects the gauges of one scrape concurrently: they share one read in flight.
  const records = (): Promise<AgentRecord[]> => {
    snapshot ??= store
      .allAgentIds()
      .then((ids) => store.getMany(ids))
      .then((rs) => rs.filter((r): r is AgentRecord => r !== undefined))
      .finally(() => (snapshot = undefined));
    return snapshot;
  };
  const stats = async () => capabilityStats(await records(), TOP_CAPABILITIES);
  new Gauge({
    name: `${metrics.prefix}capability_agents`,
    help: 'Agents offering each capability, by status (top 50 capabilities by agent count, the rest as _other).',
    labelNames: ['capability', 'status'],
    registers: [metrics.registry],
    async collect() {
      const rows = await stats().catch(() => undefined);
      if (!rows) return;
      this.reset();
      for (const r of rows) for (const [status, n] of Object.entries(r.agents)) this.set({ capability: r.capability, status }, n);
    },
  });
  new Gauge({
    name: `${metrics.prefix}capability_load_rate`,
    help: 'Mean load rate (current_load / max_concurrency) of the ONLINE agents of each capability.',
    labelNames: ['capability'],
    registers: [metrics.registry],
    async collect() {
      const rows = await stats().catch(() => undefined);
      if (!rows) return;
      this.reset();
      for (const r of rows) this.set({ capability: r.capability }, r.meanLoadRate);
    },
  });
  new Gauge({
    name: `${metrics.prefix}capability_qos`,
    help: 'QoS of the ONLINE agents of each capability: stat="min" (the weakest agent) and stat="mean".',
    labelNames: ['capability', 'stat'],
    registers: [metrics.registry],
    async collect() {
      const rows = await stats().catch(() => undefined);
      if (!rows) return;
      this.reset();
      for (const r of rows) {
        this.set({ capability: r.capability, stat: 'min' }, r.minQos);
        this.set({ capability: r.capability, stat: 'mean' }, r.meanQos);
      }
    },
  });
}
