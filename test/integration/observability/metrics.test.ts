import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAgent, stopTestAgents, testClient, uniqueName } from '@reach/sdk/testing';
import { adminToken, urls } from '../../helpers/env.js';
import { scrape, total, type Scrape } from '../../helpers/metrics.js';
import { eventually } from '../../helpers/wait.js';

// R-F2 against the running stack: every service's /metrics follows
// reach_<service>_<what>_<unit> with bounded labels, and the numbers operators watch move when
// real traffic flows (deliveries, a retry, a refusal, a parked message). Other suites run at the
// same time, so the checks are lower bounds on how much each series grew.
const SERVICES = {
  ingress: urls.ingress,
  registry: urls.registry,
  dispatcher: urls.dispatcher,
  tracker: urls.tracker,
  dead_letter: urls.deadLetter,
  router: urls.router,
  retry_scheduler: urls.retryScheduler,
  console: 'http://127.0.0.1:7420',
} as const;
type Service = keyof typeof SERVICES;

const scrapeAll = async (): Promise<Record<Service, Scrape>> =>
  Object.fromEntries(await Promise.all(Object.entries(SERVICES).map(async ([s, url]) => [s, await scrape(url)] as const))) as Record<Service, Scrape>;

/** Ids must never be label values: a message, dead letter, token or alert id in a label is unbounded cardinality. */
const ID_VALUE = /^(msg|dlq|tok|alr|lease)_[0-9A-Za-z]{10,}$/;
/** Labels of every series of one metric stay few even after the whole test suite. */
const MAX_SERIES_PER_METRIC = 300;

describe('metrics (R-F2)', () => {
  it('every service exports reach_<service>_<what>_<unit> names with bounded labels', async () => {
    const all = await scrapeAll();
    for (const [service, s] of Object.entries(all) as Array<[Service, Scrape]>) {
      expect(s.samples.length, service).toBeGreaterThan(0);
      for (const [family, type] of s.types) {
        expect(family, `${service}: ${family}`).toMatch(new RegExp(`^reach_${service}_[a-z0-9]+(_[a-z0-9]+)*$`));
        if (type === 'counter') expect(family, `${service}: counter ${family}`).toMatch(/_total$/);
        if (/duration|latency|lateness/.test(family)) expect(family, `${service}: ${family} is a time`).toMatch(/_seconds$/);
      }
      const series = new Map<string, Set<string>>();
      for (const x of s.samples) {
        for (const [k, v] of Object.entries(x.labels)) expect(v, `${service}: ${x.name}{${k}}`).not.toMatch(ID_VALUE);
        const key = JSON.stringify(Object.entries(x.labels).filter(([k]) => k !== 'le' && k !== 'quantile'));
        const set = series.get(x.name) ?? new Set<string>();
        set.add(key);
        series.set(x.name, set);
      }
      for (const [name, set] of series) expect(set.size, `${service}: ${name} has ${set.size} series`).toBeLessThanOrEqual(MAX_SERIES_PER_METRIC);
    }
  });

  describe('the numbers move when traffic flows', () => {
    const N = 6;
    const cap = uniqueName('metrics').replace(/-/g, '_');
    let before: Record<Service, Scrape>;
    let after: Record<Service, Scrape>;
    const grew = (service: Service, name: string, labels: Record<string, string> = {}) =>
      total(after[service], name, labels) - total(before[service], name, labels);

    beforeAll(async () => {
      before = await scrapeAll();
      let failedOnce = false;
      const agent = await startTestAgent({
        handlers: {
          [cap]: async (m) => {
            // One retryable failure, so a retry goes through the retry-scheduler.
            if ((m.payload as { n: number }).n === 0 && !failedOnce) {
              failedOnce = true;
              throw new Error('first try fails on purpose');
            }
            return 'ok';
          },
        },
      });
      const client = testClient();
      const ids: string[] = [];
      for (let n = 0; n < N; n++) ids.push((await client.submit({ capability: cap, payload: { n } })).message_id);
      // A refusal (no route, nothing may wait), a parked message (may wait: NO_ROUTE dead letter) and an invalid one (400).
      const refused = await client.submit({ capability: `${cap}_nobody`, payload: {} });
      const parked = await client.submit({ capability: `${cap}_nobody`, payload: {}, expire_at: Date.now() + 60_000 });
      const invalid = await fetch(`${urls.ingress}/v1/messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminToken()}`, 'content-type': 'application/json' },
        body: JSON.stringify({ payload: {} }),
      });
      expect(invalid.status).toBe(400);
      await eventually('every message in its final state', async () => {
        const states = await Promise.all(ids.map(async (id) => (await client.status(id)).status));
        const r = await client.status(refused.message_id);
        const p = await client.events(parked.message_id);
        return states.every((s) => s === 'DELIVERED') && r.status === 'REJECTED' && p.some((e) => e.reason === 'parked');
      });
      expect(agent.received.length).toBe(N + 1); // the failed try and its retry
      // The tracker and the dead-letter service fold asynchronously; their counters follow shortly.
      after = await eventually('the tracker and dead-letter counters to catch up', async () => {
        const s = await scrapeAll();
        const delivered =
          total(s.tracker, 'reach_tracker_outcomes_total', { state: 'DELIVERED' }) -
          total(before.tracker, 'reach_tracker_outcomes_total', { state: 'DELIVERED' });
        const stored =
          total(s.dead_letter, 'reach_dead_letter_stored_total', { reason: 'NO_ROUTE' }) -
          total(before.dead_letter, 'reach_dead_letter_stored_total', { reason: 'NO_ROUTE' });
        return delivered >= N && stored >= 1 ? s : undefined;
      });
    }, 90_000);
    afterAll(stopTestAgents);

    it('ingress: accepted and rejected by code, the ingest histogram', () => {
      expect(grew('ingress', 'reach_ingress_messages_total', { path: 'http', outcome: 'accepted' })).toBeGreaterThanOrEqual(N + 2);
      expect(grew('ingress', 'reach_ingress_rejected_messages_total', { path: 'http', code: '4101' })).toBeGreaterThanOrEqual(1);
      expect(grew('ingress', 'reach_ingress_ingest_duration_seconds_count', { path: 'http' })).toBeGreaterThanOrEqual(N + 2);
    });

    it('router: decisions by outcome and the route histogram', () => {
      expect(grew('router', 'reach_router_decisions_total', { outcome: 'routed' })).toBeGreaterThanOrEqual(N + 1);
      expect(grew('router', 'reach_router_decisions_total', { outcome: 'no_route' })).toBeGreaterThanOrEqual(2);
      expect(grew('router', 'reach_router_route_duration_seconds_count')).toBeGreaterThanOrEqual(N + 3);
    });

    it('dispatcher: connects, deliveries, acks, the retry and the dispatch histogram', () => {
      expect(grew('dispatcher', 'reach_dispatcher_connect_attempts_total', { outcome: 'connected' })).toBeGreaterThanOrEqual(1);
      expect(total(after.dispatcher, 'reach_dispatcher_connections')).toBeGreaterThanOrEqual(1);
      expect(grew('dispatcher', 'reach_dispatcher_deliveries_sent_total')).toBeGreaterThanOrEqual(N + 1);
      // A handler's return value answers with a `result` frame, which acks the delivery.
      expect(grew('dispatcher', 'reach_dispatcher_acks_total') + grew('dispatcher', 'reach_dispatcher_results_total')).toBeGreaterThanOrEqual(N);
      expect(grew('dispatcher', 'reach_dispatcher_retries_scheduled_total')).toBeGreaterThanOrEqual(1);
      expect(grew('dispatcher', 'reach_dispatcher_dispatch_duration_seconds_count', { outcome: 'ack' })).toBeGreaterThanOrEqual(N);
      expect(grew('dispatcher', 'reach_dispatcher_dispatch_duration_seconds_count', { outcome: 'reject' })).toBeGreaterThanOrEqual(1);
    });

    it('retry-scheduler: the retry republished', () => {
      expect(grew('retry_scheduler', 'reach_retry_scheduler_republished_total')).toBeGreaterThanOrEqual(1);
    });

    it('tracker: first-attempt and final outcomes, and the end-to-end histogram', () => {
      expect(grew('tracker', 'reach_tracker_outcomes_total', { state: 'DELIVERED', first_attempt: 'true' })).toBeGreaterThanOrEqual(N - 1);
      expect(grew('tracker', 'reach_tracker_outcomes_total', { state: 'DELIVERED', first_attempt: 'false' })).toBeGreaterThanOrEqual(1);
      expect(grew('tracker', 'reach_tracker_outcomes_total', { state: 'REJECTED' })).toBeGreaterThanOrEqual(1);
      expect(grew('tracker', 'reach_tracker_end_to_end_duration_seconds_count', { state: 'DELIVERED' })).toBeGreaterThanOrEqual(N);
    });

    it('dead-letter: inflow by reason', () => {
      expect(grew('dead_letter', 'reach_dead_letter_stored_total', { reason: 'NO_ROUTE' })).toBeGreaterThanOrEqual(1);
    });

    it('registry: registrations, heartbeats and the fleet by capability', () => {
      expect(grew('registry', 'reach_registry_registrations_total')).toBeGreaterThanOrEqual(1);
      // By capability, bounded: the 50 busiest capabilities have their own series, the rest are _other.
      const fleet = after.registry.samples.filter((x) => x.name === 'reach_registry_capability_agents');
      expect(new Set(fleet.map((x) => x.labels.capability)).size).toBeLessThanOrEqual(51);
      // Live capabilities rank first, so this one has its own series unless 50 others are live.
      const mine = fleet.some((x) => x.labels.capability === cap) ? cap : '_other';
      // Live: ONLINE, or COOLDOWN after the failure on purpose lowered its QoS.
      const live =
        total(after.registry, 'reach_registry_capability_agents', { capability: mine, status: 'ONLINE' }) +
        total(after.registry, 'reach_registry_capability_agents', { capability: mine, status: 'COOLDOWN' });
      expect(live, JSON.stringify(fleet.filter((x) => x.labels.capability === mine))).toBeGreaterThanOrEqual(1);
      expect(after.registry.samples.some((x) => x.name === 'reach_registry_capability_qos' && x.labels.capability === mine && x.labels.stat === 'min')).toBe(
        true,
      );
      expect(after.registry.samples.some((x) => x.name === 'reach_registry_capability_load_rate' && x.labels.capability === mine)).toBe(true);
    });

    it('console: consumer lag per stage', () => {
      const lag = after.console.samples.filter((x) => x.name === 'reach_console_consumer_lag_messages');
      expect(new Set(lag.map((x) => x.labels.stage)).size).toBeGreaterThanOrEqual(4);
    });
  });
});
