import { PARTITIONED_TABLES, quoteIdent, vacuumPaced, type Pool } from '@reach/store';

/** How often the tracker checks whether the read model needs a vacuum it would not get. */
export const VACUUM_CHECK_MS = 30_000;

/**
 * The read model's rows change as their messages advance: about one insert and one update per
 * message, each update a non-HOT one (the state and its time are indexed) that leaves a dead row
 * version and an entry in every index of `messages`. PostgreSQL's autovacuum reclaims them. A
 * server running with `autovacuum = off` never does: on this machine's PostgreSQL (7 December)
 * the day's partition held as many dead rows as live ones, and PostgreSQL's CPU per message at
 * 1,000 msg/s rose run after run on one stack (119 → 599 µs), every upsert walking the dead
 * entries of six indexes.
 *
 * So the tracker, the tables' only writer, vacuums them itself when the server does not: when
 * `autovacuum` is off, each partition of the read model whose dead rows passed autovacuum's own
 * default threshold (50 + 20 % of its live rows) gets a plain VACUUM (ANALYZE), paced like
 * autovacuum (vacuumPaced) — writes go on. With autovacuum on this does nothing. Returns the
 * partitions vacuumed.
 */
export async function vacuumReadModel(pg: Pool): Promise<string[]> {
  const setting = await pg.query<{ on: boolean }>(`SELECT current_setting('autovacuum') = 'on' AS on`);
  if (setting.rows[0]?.on !== false) return [];
  const due = await pg.query<{ schema: string; name: string }>(
    `SELECT s.schemaname AS schema, c.relname AS name
       FROM pg_inherits i
       JOIN pg_class c ON c.oid = i.inhrelid
       JOIN pg_class p ON p.oid = i.inhparent
       JOIN pg_stat_user_tables s ON s.relid = c.oid
      WHERE p.relname = ANY($1) AND s.n_dead_tup > 50 + 0.2 * s.n_live_tup
      ORDER BY s.n_dead_tup DESC`,
    [[...PARTITIONED_TABLES]],
  );
  await vacuumPaced(
    pg,
    due.rows.map((r) => `${quoteIdent(r.schema)}.${quoteIdent(r.name)}`),
  );
  return due.rows.map((r) => `${r.schema}.${r.name}`);
}
