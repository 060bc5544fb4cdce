import type { Pool } from 'pg';
import { quoteIdent } from './pg.js';

/**
 * The range-partitioned tables of the read model (migrations 001, 010), owned by the tracker.
 * `message_events` is no longer written (migration 012 moved timelines into `messages`): its
 * partitions are still made and dropped with those of `messages`, so it empties on schedule.
 */
export const PARTITIONED_TABLES = ['messages', 'message_events'] as const;
export type PartitionedTable = (typeof PARTITIONED_TABLES)[number];

export const DAY_S = 86_400;
/** Partitions made ahead of the current one: a tracker down for a while still finds them there. */
export const PARTITIONS_AHEAD = 3;

export interface PartitionRange {
  table: PartitionedTable;
  partition: string;
  /** Inclusive lower bound of created_at. */
  from: Date;
  /** Exclusive upper bound. */
  to: Date;
}

/**
 * Makes sure the partitions of `messages` and `message_events` exist for the interval holding
 * `now` and the `ahead` ones after it; returns the partitions it created. Boundaries are
 * multiples of `intervalS` since the epoch (UTC days for the default day). Idempotent and
 * serialised in the database, so tracker replicas may call it at once.
 */
export async function ensurePartitions(pool: Pool, opts: { intervalS?: number; ahead?: number; now?: Date } = {}): Promise<string[]> {
  const { intervalS = DAY_S, ahead = PARTITIONS_AHEAD, now = new Date() } = opts;
  if (!Number.isInteger(intervalS) || intervalS < 1) throw new RangeError(`intervalS must be a positive integer, got ${intervalS}`);
  if (!Number.isInteger(ahead) || ahead < 0) throw new RangeError(`ahead must be a non-negative integer, got ${ahead}`);
  const res = await pool.query<{ part: string }>('SELECT reach_ensure_partitions_every($1, $2, $3) AS part', [intervalS, now, ahead + 1]);
  return res.rows.map((r) => r.part);
}

/** Every partition of both tables with its range, oldest first (the DEFAULT partitions excluded). */
export async function listPartitions(pool: Pool): Promise<PartitionRange[]> {
  const out: PartitionRange[] = [];
  for (const table of PARTITIONED_TABLES) {
    const res = await pool.query<{ part: string; lo: Date; hi: Date }>('SELECT part, lo, hi FROM reach_partition_bounds($1) ORDER BY lo', [table]);
    for (const r of res.rows) out.push({ table, partition: r.part, from: r.lo, to: r.hi });
  }
  return out;
}

/** The partitions whose every row is older than `cutoff` (their upper bound is at or before it). */
export function expiredPartitions(parts: readonly PartitionRange[], cutoff: Date): PartitionRange[] {
  return parts.filter((p) => p.to.getTime() <= cutoff.getTime());
}

/**
 * Drops the partitions holding only rows created before `cutoff`. Each DROP runs in its own
 * transaction with a short lock_timeout: it needs an exclusive lock on the parent for a moment,
 * and must not queue behind a long read (every query on the table would then queue behind it);
 * a partition it could not lock is left for the next round. Returns the partitions dropped.
 */
export async function dropPartitionsBefore(pool: Pool, cutoff: Date, lockTimeoutMs = 2_000): Promise<{ dropped: string[]; busy: string[] }> {
  const dropped: string[] = [];
  const busy: string[] = [];
  for (const p of expiredPartitions(await listPartitions(pool), cutoff)) {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.trunc(lockTimeoutMs))}`);
      await client.query(`DROP TABLE IF EXISTS ${quoteIdent(p.partition)}`);
      await client.query('COMMIT');
      dropped.push(p.partition);
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      // 55P03 lock_not_available: busy now, dropped next round
      if ((err as { code?: string }).code !== '55P03') throw err;
      busy.push(p.partition);
    } finally {
      client.release();
    }
  }
  return { dropped, busy };
}

/**
 * `messages_p20250715` (whole-day intervals) or `messages_p20250715_134500`: the partition of
 * `table` holding `date` for partitions of `intervalS` seconds. Mirrors the SQL of migration 010.
 */
export function partitionName(table: PartitionedTable, date: Date, intervalS: number = DAY_S): string {
  const start = new Date(Math.floor(date.getTime() / 1000 / intervalS) * intervalS * 1000);
  const iso = start.toISOString(); // 2025-07-15T13:45:00.000Z
  const day = iso.slice(0, 10).replace(/-/g, '');
  return intervalS % DAY_S === 0 ? `${table}_p${day}` : `${table}_p${day}_${iso.slice(11, 19).replace(/:/g, '')}`;
}
