import type { Pool } from 'pg';
import type { Redis } from 'ioredis';
import { PARTITIONED_TABLES } from './partitions.js';

/** What one Agent-Reach table occupies in PostgreSQL (a partitioned table: summed over its partitions). */
export interface TableStorage {
  table: string;
  /** The planner's row estimate (reltuples; -1 when never analysed counts as 0). */
  rows: number;
  tableBytes: number;
  indexBytes: number;
  totalBytes: number;
  /** Partitions besides DEFAULT (0 for plain tables). */
  partitions: number;
  /** The oldest data kept, as an ISO time: the oldest partition's start, else the oldest row by an indexed time column. */
  oldest: string | null;
}

/** The time column each bounded table is purged by (all indexed, so min() is one index probe). */
const AGE_COLUMN: Record<string, string> = { dead_letters: 'created_at', audit_log: 'at', idempotency_keys: 'expires_at', revoked_tokens: 'expires_at' };

/**
 * Sizes of every table of the public schema, largest first. Partitions are folded into their
 * parent (pg_partition_tree), so `messages` is one row whatever its number of days.
 */
export async function pgStorage(pool: Pool): Promise<TableStorage[]> {
  const res = await pool.query<{ table: string; rows: string; table_bytes: string; index_bytes: string; total_bytes: string; partitions: number }>(
    `SELECT c.relname AS table,
            sum(greatest(l.reltuples, 0))::bigint AS rows,
            sum(pg_table_size(l.oid))::bigint AS table_bytes,
            sum(pg_indexes_size(l.oid))::bigint AS index_bytes,
            sum(pg_total_relation_size(l.oid))::bigint AS total_bytes,
            (count(*) FILTER (WHERE l.oid <> c.oid AND pg_get_expr(l.relpartbound, l.oid) <> 'DEFAULT'))::int AS partitions
       FROM pg_class c
       -- a plain table is its own (only) leaf
       JOIN LATERAL (SELECT relid FROM pg_partition_tree(c.oid) UNION SELECT c.oid) t ON true
       JOIN pg_class l ON l.oid = t.relid
      WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
      GROUP BY c.relname
      ORDER BY 5 DESC, 1`,
  );
  const out: TableStorage[] = [];
  for (const r of res.rows) {
    let oldest: string | null = null;
    if ((PARTITIONED_TABLES as readonly string[]).includes(r.table)) {
      const o = await pool.query<{ lo: Date | null }>('SELECT min(lo) AS lo FROM reach_partition_bounds($1)', [r.table]);
      oldest = o.rows[0]?.lo?.toISOString() ?? null;
    } else if (AGE_COLUMN[r.table]) {
      const o = await pool.query<{ at: Date | null }>(`SELECT min(${AGE_COLUMN[r.table]}) AS at FROM ${r.table}`);
      oldest = o.rows[0]?.at?.toISOString() ?? null;
    }
    out.push({
      table: r.table,
      rows: Number(r.rows),
      tableBytes: Number(r.table_bytes),
      indexBytes: Number(r.index_bytes),
      totalBytes: Number(r.total_bytes),
      partitions: r.partitions,
      oldest,
    });
  }
  return out;
}

/** One family of Redis keys (ids replaced by `*`, hash tags by `{agent}`). */
export interface KeyPattern {
  pattern: string;
  keys: number;
  /** MEMORY USAGE summed over the keys. */
  bytes: number;
  /** Keys without a TTL: they live until their owner deletes them. */
  withoutTtl: number;
}

export interface RedisStorage {
  /** INFO memory used_memory: the whole Redis server, every database. */
  usedMemory: number;
  /** Keys in this connection's database (DBSIZE). */
  keys: number;
  /** Present when asked for (a SCAN of the database, bounded by `maxKeys`). */
  patterns?: KeyPattern[];
  /** True when the scan stopped at maxKeys. */
  truncated?: boolean;
}

/** `reach:res:{agent-1}:msg_01J…` → `reach:res:{agent}:*`: the family a key belongs to. */
export function keyPattern(key: string): string {
  // The registry's keys end in a capability or agent name, which may itself hold ':'.
  const named = /^(reach:(?:cap|agent|agent-rev):)./.exec(key);
  if (named) return `${named[1]}*`;
  const parts = key.replace(/\{[^}]*\}/g, '{agent}').split(':');
  return parts
    .map((p, i) => (i >= 2 && p !== '{agent}' && /[0-9_.-]|^[a-z0-9]{16,}$/i.test(p) && !/^(HIGH|NORMAL|LOW|win|bucket)$/.test(p) ? '*' : p))
    .join(':');
}

/**
 * Redis memory and key count; with `scan`, also the key families of this database with their
 * bytes and how many have no TTL (the audit of docs/storage.md, measured rather than read).
 */
export async function redisStorage(redis: Redis, opts: { scan?: boolean; maxKeys?: number } = {}): Promise<RedisStorage> {
  const info = await redis.info('memory');
  const usedMemory = Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);
  const keys = await redis.dbsize();
  if (!opts.scan) return { usedMemory, keys };
  const maxKeys = opts.maxKeys ?? 200_000;
  const families = new Map<string, KeyPattern>();
  let cursor = '0';
  let seen = 0;
  do {
    const [next, batch] = await redis.scan(cursor, 'COUNT', 1000);
    cursor = next;
    const pipe = redis.pipeline();
    for (const k of batch) {
      pipe.call('MEMORY', 'USAGE', k, 'SAMPLES', '0');
      pipe.pttl(k);
    }
    const res = (await pipe.exec()) ?? [];
    batch.forEach((k, i) => {
      const pattern = keyPattern(k);
      let f = families.get(pattern);
      if (!f) families.set(pattern, (f = { pattern, keys: 0, bytes: 0, withoutTtl: 0 }));
      f.keys++;
      f.bytes += Number(res[2 * i]?.[1] ?? 0);
      if (Number(res[2 * i + 1]?.[1]) === -1) f.withoutTtl++;
    });
    seen += batch.length;
  } while (cursor !== '0' && seen < maxKeys);
  return { usedMemory, keys, patterns: [...families.values()].sort((a, b) => b.bytes - a.bytes), truncated: cursor !== '0' };
}
