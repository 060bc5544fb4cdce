import type { Pool } from 'pg';

/** The monthly-partitioned tables (migration 001), for callers that list or prune partitions. */
export const PARTITIONED_TABLES = ['messages', 'message_events'] as const;

/**
 * Makes sure the monthly partitions of `messages` and `message_events` exist for the current
 * UTC month and the next `monthsAhead` months; returns the partitions it created.
 *
 * Services call it at start (and the tracker may call it daily), so the month after next never
 * arrives without its partitions: rows would then pile up in the DEFAULT partition, which
 * works but loses pruning. The SQL function is idempotent and serialises concurrent callers.
 */
export async function ensurePartitions(pool: Pool, monthsAhead = 2): Promise<string[]> {
  if (!Number.isInteger(monthsAhead) || monthsAhead < 0) {
    throw new RangeError(`monthsAhead must be a non-negative integer, got ${monthsAhead}`);
  }
  const res = await pool.query<{ part: string }>(`SELECT reach_ensure_partitions(date_trunc('month', now() AT TIME ZONE 'UTC')::date, $1) AS part`, [
    monthsAhead + 1,
  ]);
  return res.rows.map((r) => r.part);
}

/** `messages_y2025m07`: the partition of `table` holding rows created in `date`'s UTC month. */
export function partitionName(table: (typeof PARTITIONED_TABLES)[number], date: Date): string {
  const y = date.getUTCFullYear().toString().padStart(4, '0');
  const m = (date.getUTCMonth() + 1).toString().padStart(2, '0');
  return `${table}_y${y}m${m}`;
}
