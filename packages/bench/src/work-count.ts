import { closeSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Admin } from '@reach/kafka';
import type { Pool, Redis } from '@reach/store';
import type { WorkCost } from './results.js';

/**
 * What the stack did for the messages of a window, counted where it happened, so a change can
 * be judged by the work it removes and not only by the time it saves:
 *
 * - Kafka records produced, per topic (end offsets), and consumed, per committing group
 *   (committed offsets);
 * - Kafka requests per service and API (`reach_<service>_kafka_requests_total{api}`, kafkajs's
 *   instrumentation events);
 * - Redis commands, by command (`INFO commandstats`: the commands scripts run count too);
 * - PostgreSQL statements per service (`reach_<service>_pg_statements_total`), and the
 *   database's transactions and rows (`pg_stat_database`);
 * - log lines per service (the lines appended to `<REACH_HOME>/logs/<service>.log`).
 *
 * Everything is read before and after the window; WorkCost is the difference divided by the
 * messages delivered in it. Counts of other clients of the same Kafka, Redis or database (the
 * bench's own tap, another stack) are included: run on a quiet machine.
 */
export interface WorkSources {
  admin: Admin;
  redis: Redis;
  pg: Pool;
  /** Every service's base URL by name (its /metrics). */
  services: Record<string, string>;
  logDir: string;
  /** Consumer groups that commit (ConsumerLag.discover). */
  groups: () => readonly string[];
}

export interface WorkSnapshot {
  produced: Record<string, number>;
  consumed: Record<string, number>;
  requests: Record<string, Record<string, number>>;
  redis: Record<string, number>;
  pgStatements: Record<string, number>;
  pg: { xacts: number; inserted: number; updated: number; deleted: number };
  logBytes: Record<string, number>;
}

const sum = (xs: Iterable<number>) => [...xs].reduce((a, b) => a + b, 0);

/** `cmdstat_evalsha:calls=12,usec=...` lines of INFO commandstats → calls by command. */
export function parseCommandStats(info: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

/** The samples of one metric in a Prometheus text page, by its first label's value ('' without labels). */
export function metricSamples(page: string, name: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of page.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-z_]+)(?:\{[a-z_]+="([^"]*)"[^}]*\})? ([0-9.e+-]+)$/.exec(line);
    if (m && m[1] === name) out[m[2] ?? ''] = Number(m[3]);
  }
  return out;
}

async function metricsOf(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(3000) }).catch(() => undefined);
  return res?.status === 200 ? res.text() : '';
}

export async function workSnapshot(s: WorkSources): Promise<WorkSnapshot> {
  const produced: Record<string, number> = {};
  const topics = (await s.admin.listTopics()).filter((t) => t.startsWith('reach.') && !t.startsWith('reach.bench'));
  for (const topic of topics.sort()) produced[topic] = sum((await s.admin.fetchTopicOffsets(topic)).map((o) => Number(o.high)));
  const consumed: Record<string, number> = {};
  for (const groupId of s.groups()) {
    consumed[groupId] = sum((await s.admin.fetchOffsets({ groupId })).flatMap((t) => t.partitions.map((p) => Math.max(0, Number(p.offset)))));
  }
  const requests: Record<string, Record<string, number>> = {};
  const pgStatements: Record<string, number> = {};
  for (const [service, url] of Object.entries(s.services)) {
    const prefix = `reach_${service.replace(/-/g, '_')}_`;
    const page = await metricsOf(url);
    requests[service] = metricSamples(page, `${prefix}kafka_requests_total`);
    pgStatements[service] = metricSamples(page, `${prefix}pg_statements_total`)[''] ?? 0;
  }
  const redis = parseCommandStats(await s.redis.info('commandstats'));
  const row = (await s.pg.query('SELECT xact_commit, tup_inserted, tup_updated, tup_deleted FROM pg_stat_database WHERE datname = current_database()'))
    .rows[0] as Record<string, string> | undefined;
  const pg = {
    xacts: Number(row?.xact_commit ?? 0),
    inserted: Number(row?.tup_inserted ?? 0),
    updated: Number(row?.tup_updated ?? 0),
    deleted: Number(row?.tup_deleted ?? 0),
  };
  const logBytes: Record<string, number> = {};
  for (const f of safeList(s.logDir).filter((n) => n.endsWith('.log'))) logBytes[f.slice(0, -4)] = statSync(join(s.logDir, f)).size;
  return { produced, consumed, requests, redis, pgStatements, pg, logBytes };
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Newlines in a log file between byte `from` and byte `to`. */
function linesBetween(file: string, from: number, to: number): number {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return 0;
  }
  try {
    const buf = Buffer.alloc(1 << 16);
    let pos = from;
    let lines = 0;
    while (pos < to) {
      const n = readSync(fd, buf, 0, Math.min(buf.length, to - pos), pos);
      if (n <= 0) return lines;
      for (let i = 0; i < n; i++) if (buf[i] === 10) lines++;
      pos += n;
    }
    return lines;
  } finally {
    closeSync(fd);
  }
}

const delta = (a: Record<string, number>, b: Record<string, number>) => Object.fromEntries(Object.keys(b).map((k) => [k, Math.max(0, b[k]! - (a[k] ?? 0))]));

/** The work between two snapshots, per delivered message (keys with nothing done left out). */
export function workCost(a: WorkSnapshot, b: WorkSnapshot, messages: number, logDir: string): WorkCost {
  const per = (r: Record<string, number>) =>
    Object.fromEntries(
      Object.entries(r)
        .filter(([, v]) => v > 0)
        .map(([k, v]) => [k, messages > 0 ? v / messages : 0]),
    );
  const requests: Record<string, Record<string, number>> = {};
  for (const service of Object.keys(b.requests)) {
    const d = per(delta(a.requests[service] ?? {}, b.requests[service]!));
    if (Object.keys(d).length > 0) requests[service] = d;
  }
  const logLines: Record<string, number> = {};
  for (const [name, size] of Object.entries(b.logBytes)) {
    const from = a.logBytes[name];
    if (from === undefined || size <= from) continue;
    logLines[name] = linesBetween(join(logDir, `${name}.log`), from, size);
  }
  const pg = {
    xacts: b.pg.xacts - a.pg.xacts,
    inserted: b.pg.inserted - a.pg.inserted,
    updated: b.pg.updated - a.pg.updated,
    deleted: b.pg.deleted - a.pg.deleted,
  };
  return {
    messages,
    produced: per(delta(a.produced, b.produced)),
    consumed: per(delta(a.consumed, b.consumed)),
    requests,
    redis: per(delta(a.redis, b.redis)),
    pgStatements: per(delta(a.pgStatements, b.pgStatements)),
    pg: per(pg),
    logLines: per(logLines),
  };
}
