import { randomBytes } from 'node:crypto';
import { defaultHome } from '@reach/cli';
import { loadConfig, OPTIONS, silentLogger, type OptionKey } from '@reach/core';
import { createKafka } from '@reach/kafka';
import { localStack, testClient } from '@reach/sdk/testing';
import { createPgPool, createRedis, type Pool } from '@reach/store';
import { SoakAgents, type AgentGroup } from './agents.js';
import { SoakLoad, type Sent } from './load.js';
import type { SoakOptions } from './options.js';
import { Sampler, type Sample } from './sampler.js';
import { levelsOff, rssFlat, type Verdict } from './verdict.js';

export interface SoakReport {
  kind: 'reach-soak';
  options: SoakOptions;
  /** The stack's retention settings, as the soak read them from the same environment. */
  retention: { messagesS: number; partitionIntervalS: number; idempotencyTtlS: number };
  seconds: number;
  samples: Sample[];
  handled: number;
  failed: number;
  refused: number;
  /** Why submissions were refused after the client's retries (`<http status> <code>`). */
  refusals: Record<string, number>;
  /** What the tracker's retention removed during the run (its metrics, end − start). */
  droppedPartitions: number;
  purgedRows: number;
  /** Age of the oldest partition start at the end, in seconds. */
  oldestKeptS: number | null;
  verdict: Verdict;
}

const TERMINAL = new Set(['DELIVERED', 'REJECTED', 'DEAD']);
const CHECK_EVERY_MS = 5_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The stack's options from `env`, ignoring REACH_* names that are no option (a test's own). */
function options<K extends OptionKey>(keys: readonly K[], env: NodeJS.ProcessEnv) {
  const known = new Set(Object.values(OPTIONS).map((opt) => opt.env));
  return loadConfig(keys, Object.fromEntries(Object.entries(env).filter(([k]) => known.has(k))));
}

async function metricTotal(url: string, name: string): Promise<number> {
  try {
    const text = await (await fetch(`${url}/metrics`)).text();
    return text
      .split('\n')
      .filter((l) => l.startsWith(name))
      .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  } catch {
    return 0;
  }
}

/**
 * The interval only shapes partitions created from now on: a read model made with daily
 * partitions keeps today's whole, and retention drops nothing for a day (a soak on such a
 * database measured storage that could only grow). Refused up front, with the way out.
 */
async function refuseMismatchedPartitions(pg: Pool, intervalS: number): Promise<void> {
  const res = await pg
    .query<{ span: string }>("SELECT extract(epoch FROM hi - lo) AS span FROM reach_partition_bounds('messages') WHERE lo <= now() AND hi > now()")
    .catch(() => ({ rows: [] as Array<{ span: string }> }));
  const span = Number(res.rows[0]?.span ?? NaN);
  if (Number.isFinite(span) && span > intervalS * 1.5)
    throw new Error(
      `the read model's current partition spans ${span} s, not REACH_PARTITION_INTERVAL=${intervalS} s: retention cannot drop data within the run. ` +
        'Start the stack on an empty database (REACH_DATABASE_URL) with the shortened settings.',
    );
}

/**
 * One soak run against the running stack of `env` (its retention is the stack's own: start it
 * with REACH_RETENTION_MESSAGES / REACH_PARTITION_INTERVAL shortened to see data dropped):
 * stable and transient SDK agents, steady load, a sample every `sampleS`, every accepted
 * message checked for a terminal state `settleS` after it was sent (before retention can drop
 * it), then the verdict.
 */
export async function runSoak(o: SoakOptions, env: NodeJS.ProcessEnv = process.env, progress: (line: string) => void = () => undefined): Promise<SoakReport> {
  const stack = localStack(env);
  if (!stack.adminToken) throw new Error('no admin token: set REACH_ADMIN_TOKEN or run `reach up` first');
  const home = env.REACH_HOME ?? defaultHome();
  const cfg = options(['databaseUrl', 'redisUrl', 'retentionMessages', 'partitionInterval', 'idempotencyTtlS', 'trackerPort', 'httpHost'], env);
  const brokers = (env.REACH_KAFKA_BROKERS ?? '').split(',').filter(Boolean);
  if (brokers.length === 0) {
    try {
      const { readFileSync } = await import('node:fs');
      const state = JSON.parse(readFileSync(`${home}/state.json`, 'utf8')) as { endpoints: Record<string, string> };
      brokers.push(...(state.endpoints.kafka ?? '127.0.0.1:9092').split(','));
    } catch {
      brokers.push('127.0.0.1:9092');
    }
  }
  const trackerUrl = `http://${cfg.httpHost === '0.0.0.0' ? '127.0.0.1' : cfg.httpHost}:${cfg.trackerPort}`;
  const run = randomBytes(3).toString('hex');
  const capability = `soak_${run}`;
  const pg = createPgPool(cfg.databaseUrl, { logger: silentLogger, max: 2 });
  await refuseMismatchedPartitions(pg, cfg.partitionInterval);
  const redis = createRedis(cfg.redisUrl, silentLogger);
  const admin = createKafka({ brokers, clientId: 'reach-soak', logger: silentLogger }).admin();
  await admin.connect();
  const sampler = new Sampler({ pg, redis, admin, brokers, home });
  const agents = new SoakAgents(capability, o.failRate, env);
  const load = new SoakLoad(testClient({ stack }), capability, run);
  const samples: Sample[] = [];
  const byStatus: Record<string, number> = {};
  let checked = 0;
  let notTerminal = 0;
  let recheck: Sent[] = [];
  const circuitsSeen = new Set<string>();
  const droppedBefore = await metricTotal(trackerUrl, 'reach_tracker_retention_dropped_partitions_total');
  const purgedBefore = await metricTotal(trackerUrl, 'reach_tracker_retention_purged_rows_total');

  /** Checks the messages sent before `before` (and those still open last time) in the read model. */
  const check = async (before: number, final: boolean): Promise<void> => {
    const batch = [...recheck, ...load.takeSentBefore(before)];
    recheck = [];
    if (batch.length === 0) return;
    const res = await pg.query<{ message_id: string; status: string }>('SELECT message_id, status FROM messages WHERE message_id = ANY($1)', [
      batch.map((s) => s.id),
    ]);
    const status = new Map(res.rows.map((r) => [r.message_id, r.status]));
    // A message still open is looked at again while retention cannot have dropped it yet (its
    // partition goes between retention and retention + one interval after its created_at).
    const giveUpBefore = Date.now() - Math.max(o.settleS, cfg.retentionMessages - 2 * (CHECK_EVERY_MS / 1000)) * 1000;
    for (const s of batch) {
      const st = status.get(s.id);
      if (st && TERMINAL.has(st)) {
        checked++;
        byStatus[st] = (byStatus[st] ?? 0) + 1;
      } else if (!final && s.sentAt > giveUpBefore) recheck.push(s);
      else {
        checked++;
        notTerminal++;
        byStatus[st ?? 'MISSING'] = (byStatus[st ?? 'MISSING'] ?? 0) + 1;
      }
    }
  };

  const started = Date.now();
  let transient: AgentGroup | undefined;
  try {
    progress(
      `soak ${run}: ${o.agentProcesses}×${o.agentsPerProcess} stable SDK agents + 1 coming and going every ${o.churnS} s, ${o.rate} msg/s, ${(o.failRate * 100).toFixed(1)} % handler failures, ${o.minutes} min`,
    );
    progress(
      `  retention of the stack: messages ${cfg.retentionMessages} s, partitions of ${cfg.partitionInterval} s, idempotency keys ${cfg.idempotencyTtlS} s`,
    );
    for (let i = 0; i < o.agentProcesses; i++) await agents.start(o.agentsPerProcess, false);
    await sleep(2_000); // the routers' views see the agents
    load.start(o.rate);
    const end = started + o.minutes * 60_000;
    let nextSample = Date.now();
    let nextChurn = Date.now() + o.churnS * 1000;
    while (Date.now() < end) {
      const now = Date.now();
      if (now >= nextSample) {
        const s = await sampler.sample((now - started) / 1000, { accepted: load.acceptedTotal, terminal: checked - notTerminal }).catch((err: unknown) => {
          progress(`  sample failed (${(err as Error).message}); next one in ${o.sampleS} s`);
          return undefined;
        });
        nextSample += o.sampleS * 1000;
        if (!s) continue;
        samples.push(s);
        s.openCircuits.forEach((a) => circuitsSeen.add(a));
        progress(
          `  ${(s.atS / 60).toFixed(1)} min: PG ${(s.pgTotal / 1048576).toFixed(1)} MiB, Redis ${(s.redisDbBytes / 1048576).toFixed(1)} MiB / ${s.redisKeys} keys, lag ${s.consumerLag}, open circuits ${s.openCircuits.length}, accepted ${s.accepted}`,
        );
      }
      if (now >= nextChurn) {
        if (transient) {
          await agents.stop(transient);
          transient = undefined;
        } else transient = await agents.start(1, true).catch(() => undefined);
        nextChurn += o.churnS * 1000;
      }
      await check(Date.now() - o.settleS * 1000, false);
      // circuits between samples too: one that opens and closes within a minute still counts
      (await redis.zrange('reach:circuits', 0, -1)).forEach((a) => circuitsSeen.add(a));
      await sleep(Math.min(CHECK_EVERY_MS, Math.max(0, end - Date.now())));
    }
    progress('  load stopped; draining');
    await load.stop();
    const drainEnd = Date.now() + o.drainS * 1000;
    while (Date.now() < drainEnd && (load.accepted.length > 0 || recheck.length > 0)) {
      await check(Date.now() + 1, false);
      if (load.accepted.length === 0 && recheck.length === 0) break;
      await sleep(2_000);
    }
    await check(Date.now() + 1, true);
    const last = await sampler.sample((Date.now() - started) / 1000, { accepted: load.acceptedTotal, terminal: checked - notTerminal }).catch(() => undefined);
    if (last) samples.push(last);
  } finally {
    await load.stop().catch(() => undefined);
    await agents.stopAll().catch(() => undefined);
  }
  const oldest = await pg.query<{ lo: Date | null }>("SELECT min(lo) AS lo FROM reach_partition_bounds('messages')").catch(() => ({ rows: [{ lo: null }] }));
  const oldestLo = oldest.rows[0]?.lo;
  const droppedPartitions = (await metricTotal(trackerUrl, 'reach_tracker_retention_dropped_partitions_total')) - droppedBefore;
  const purgedRows = (await metricTotal(trackerUrl, 'reach_tracker_retention_purged_rows_total')) - purgedBefore;
  await Promise.allSettled([pg.end(), admin.disconnect(), redis.quit()]);

  const all = agents.all();
  const opened = (transient: boolean) => all.filter((a) => a.transient === transient && circuitsSeen.has(a.id)).map((a) => a.id);
  // Retention can drop data once the oldest partition is entirely past it (retention + one
  // interval), and idempotency keys once their TTL has run out (Redis and PostgreSQL both).
  const levelFromS = Math.max(o.warmupS, cfg.retentionMessages + cfg.partitionInterval, cfg.idempotencyTtlS);
  const verdict: Verdict = {
    checked,
    notTerminal,
    byStatus,
    circuitsOpened: { stable: opened(false), transient: opened(true) },
    rss: rssFlat(samples, o.warmupS),
    postgres: levelsOff(samples, levelFromS, (s) => s.pgTotal, 'PostgreSQL'),
    redis: levelsOff(samples, Math.max(o.warmupS, cfg.idempotencyTtlS, 300), (s) => s.redisDbBytes, 'Redis'),
    ok: false,
  };
  verdict.ok =
    notTerminal === 0 &&
    checked > 0 &&
    verdict.circuitsOpened.stable.length + verdict.circuitsOpened.transient.length === 0 &&
    verdict.rss.ok === true &&
    verdict.postgres.ok === true &&
    verdict.redis.ok === true;
  const counts = agents.counts();
  return {
    kind: 'reach-soak',
    options: o,
    retention: { messagesS: cfg.retentionMessages, partitionIntervalS: cfg.partitionInterval, idempotencyTtlS: cfg.idempotencyTtlS },
    seconds: (Date.now() - started) / 1000,
    samples,
    handled: counts.handled,
    failed: counts.failed,
    refused: load.refused,
    refusals: load.refusals,
    droppedPartitions,
    purgedRows,
    oldestKeptS: oldestLo ? (Date.now() - oldestLo.getTime()) / 1000 : null,
    verdict,
  };
}
