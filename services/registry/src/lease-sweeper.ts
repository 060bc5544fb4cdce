import type { Logger } from '@reach/core';
import type { AgentStore } from './agent-store.js';
import type { AgentFeed } from './agent-feed.js';
import type { RegistryMetrics } from './registry-metrics.js';

export interface SweeperOptions {
  store: AgentStore;
  feed: AgentFeed;
  log: Logger;
  metrics: RegistryMetrics;
  /** How often due leases are looked for (R-A4 asks for OFFLINE soon after the deadline). */
  intervalMs: number;
  /** How long an OFFLINE agent stays listed before its record is purged (tombstone). */
  offlineRetentionMs: number;
}

/** Claimed per script call, so one sweep never blocks Redis for long. */
const BATCH = 500;

/**
 * Marks agents OFFLINE once their lease ran out — REACH_MISSED_HEARTBEATS heartbeats missed
 * (R-A4) — and later purges them. Every instance runs one; the claim is an atomic script
 * over a sorted set of lease deadlines, so each expiry is handled by exactly one instance.
 * A tick never overlaps the previous one.
 */
export function startLeaseSweeper(opts: SweeperOptions): { stop(): Promise<void> } {
  const { store, feed, log, metrics } = opts;
  let running: Promise<void> | undefined;
  let failing = false;

  async function sweep(): Promise<void> {
    const now = Date.now();
    for (;;) {
      const expired = await store.expireDue(now, BATCH, now + opts.offlineRetentionMs);
      for (const id of expired) log.info({ agent_id: id }, 'agent OFFLINE: lease expired after missed heartbeats');
      metrics.offlineTransitions.inc(expired.length);
      feed.publishInBackground(expired);
      if (expired.length < BATCH) break;
    }
    for (;;) {
      const purged = await store.purgeDue(now, BATCH);
      for (const id of purged) log.info({ agent_id: id }, 'OFFLINE agent purged after the retention period');
      metrics.purges.inc(purged.length);
      feed.publishInBackground(purged);
      if (purged.length < BATCH) break;
    }
  }

  const timer = setInterval(() => {
    if (running) return;
    running = sweep()
      .then(() => {
        if (failing) log.info('lease sweeper recovered');
        failing = false;
      })
      .catch((err: unknown) => {
        // Redis away: leases cannot be judged now; the next tick tries again.
        if (!failing) log.warn({ err }, 'lease sweep failed');
        failing = true;
      })
      .finally(() => {
        running = undefined;
      });
  }, opts.intervalMs);
  timer.unref();

  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
