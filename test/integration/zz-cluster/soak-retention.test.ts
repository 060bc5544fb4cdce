import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { DEFAULTS, runSoak, soakReport, type SoakReport } from '@reach/soak';
import { createPgPool, createRedis, quoteIdent, type Pool } from '@reach/store';
import { saveFigures, startSecondStack, type SecondStack } from './second-stack.js';

// Issue 26: the short soak `npm test` runs — two minutes of steady traffic through SDK agents
// failing 3 % of their messages (plus one coming and going) on a stack of its own whose read
// model keeps messages 60 s in partitions of 10 s, dead letters and the audit trail 30 s.
// Whole partitions are dropped on schedule while the newer data stays: every message the soak
// sent is found in the read model, terminal, before its partition ages out (the last ones at
// the very end), and an old dead letter, audit row and expired idempotency key are purged while fresh ones stay.
// Its own database and Redis db (a daily partition made by another stack in the shared
// cluster database would hold today's rows in one piece).
const DATABASE = 'reach_soak';
const DATABASE_URL = `postgres://postgres@127.0.0.1:5432/${DATABASE}`;
const REDIS_URL = 'redis://127.0.0.1:6379/4';
const RETENTION_S = 60;
const INTERVAL_S = 10;
const RATE = 10;

let s: SecondStack;
let pg: Pool;
let report: SoakReport;

beforeAll(async () => {
  const admin = createPgPool('postgres://postgres@127.0.0.1:5432/postgres', { logger: silentLogger, max: 1 });
  await admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(DATABASE)} WITH (FORCE)`).finally(() => admin.end());
  const redis = createRedis(REDIS_URL, silentLogger);
  await redis.flushdb();
  await redis.quit();
  s = await startSecondStack({
    name: 'soak',
    portBase: 12000,
    extraEnv: {
      REACH_DATABASE_URL: DATABASE_URL,
      REACH_REDIS_URL: REDIS_URL,
      REACH_RETENTION_MESSAGES: `${RETENTION_S}s`,
      REACH_PARTITION_INTERVAL: `${INTERVAL_S}s`,
      REACH_RETENTION_DEAD_LETTERS: '30s',
      REACH_RETENTION_AUDIT: '30s',
      REACH_IDEMPOTENCY_TTL_S: '300',
    },
  });
  pg = createPgPool(DATABASE_URL, { logger: silentLogger, max: 2 });
});

afterAll(async () => {
  await pg?.end();
  await s?.down(!report?.verdict.checked);
});

describe('pnpm soak (short), retention in seconds', () => {
  it('drops old partitions and rows on schedule while every newer message stays, terminal', { timeout: 400_000 }, async () => {
    // rows older than their retention, and fresh ones beside them
    await pg.query(
      `INSERT INTO dead_letters (dlq_id, reason, code, service, created_at) VALUES
         ('dlq_old', 'NO_ROUTE', 2001, 'test', now() - interval '1 hour'), ('dlq_new', 'NO_ROUTE', 2001, 'test', now() + interval '1 hour')`,
    );
    await pg.query(
      `INSERT INTO audit_log (audit_id, at, actor, service, instance, action, status, result) VALUES
         ('aud_old', now() - interval '1 hour', 'test', 'test', 'test', 'test', 0, 'ok'), ('aud_new', now() + interval '1 hour', 'test', 'test', 'test', 'test', 0, 'ok')`,
    );
    await pg.query(
      `INSERT INTO idempotency_keys (producer, idempotency_key, message_id, created_at, expires_at) VALUES
         ('test', 'expired', 'msg_x', now() - interval '2 hours', now() - interval '1 hour'), ('test', 'live', 'msg_y', now(), now() + interval '1 hour')`,
    );
    report = await runSoak(
      { ...DEFAULTS, minutes: 2, rate: RATE, sampleS: 20, warmupS: 40, churnS: 30, settleS: 15, drainS: 45, agentProcesses: 1 },
      s.env,
      (line) => process.stdout.write(`${line}\n`),
    );
    process.stdout.write(`${soakReport(report)}\n`);
    saveFigures('soak-short', { samples: report.samples.length, verdict: report.verdict, dropped: report.droppedPartitions, oldestKeptS: report.oldestKeptS });

    const v = report.verdict;
    // the load is a careful client: on a saturated machine some submissions are refused (printed)
    expect(v.checked).toBeGreaterThan(RATE * 120 * 0.5);
    // nothing lost or stranded: every accepted message was found terminal in the read model
    expect({ notTerminal: v.notTerminal, missing: v.byStatus.MISSING ?? 0 }).toEqual({ notTerminal: 0, missing: 0 });
    // partitions dropped whole by the tracker (two tables, one partition each per 10 s)
    expect(report.droppedPartitions).toBeGreaterThanOrEqual(2 * Math.floor((120 - RETENTION_S - INTERVAL_S) / INTERVAL_S));
    // on schedule: the oldest partition kept begins no earlier than retention + one partition
    // + one upkeep period (a quarter of the interval) + the time this check takes
    expect(report.oldestKeptS).not.toBeNull();
    expect(report.oldestKeptS!).toBeLessThanOrEqual(RETENTION_S + INTERVAL_S + INTERVAL_S / 4 + 5);
    const rows = await pg.query<{ n: number; oldest_s: number }>(
      `SELECT count(*)::int AS n, coalesce(extract(epoch FROM now() - min(created_at)), 0)::float AS oldest_s FROM messages`,
    );
    expect(rows.rows[0]!.n).toBeGreaterThan(0);
    expect(rows.rows[0]!.oldest_s).toBeLessThanOrEqual(RETENTION_S + INTERVAL_S + INTERVAL_S / 4 + 5);
    // batched purges of the other tables: the old rows went, the fresh ones stay
    const left = async (sql: string) => (await pg.query<{ id: string }>(sql)).rows.map((r) => r.id).sort();
    expect(await left(`SELECT dlq_id AS id FROM dead_letters WHERE dlq_id IN ('dlq_old', 'dlq_new')`)).toEqual(['dlq_new']);
    expect(await left(`SELECT audit_id AS id FROM audit_log WHERE audit_id IN ('aud_old', 'aud_new')`)).toEqual(['aud_new']);
    expect(await left(`SELECT idempotency_key AS id FROM idempotency_keys WHERE producer = 'test'`)).toEqual(['live']);
  });
});
