import type { Pool } from 'pg';
import { quoteIdent } from './pg.js';

/** Rows one purge statement deletes: small enough that its row locks and WAL burst stay short. */
export const PURGE_BATCH = 1_000;

export interface PurgeSpec {
  /** A plain (non-partitioned) table, or one partition. */
  table: string;
  /** The rows to delete, as a condition on `table` with `$1` as the cutoff; e.g. `created_at < $1`. */
  where: string;
  cutoff: Date;
  batch?: number;
  /** Stop after this many batches (the next round goes on); bounds one round's time. */
  maxBatches?: number;
}

/**
 * Deletes the rows matching `where` in batches of `batch`, each statement its own transaction,
 * so no lock is held longer than one batch and concurrent writers are never blocked for the
 * whole purge. Rows are picked by ctid through the condition's index. Returns the rows deleted.
 */
export async function purgeInBatches(pool: Pool, spec: PurgeSpec): Promise<number> {
  const batch = spec.batch ?? PURGE_BATCH;
  const maxBatches = spec.maxBatches ?? 1_000;
  const t = quoteIdent(spec.table);
  const sql = `DELETE FROM ${t} WHERE ctid = ANY (ARRAY(SELECT ctid FROM ${t} WHERE ${spec.where} LIMIT ${Math.trunc(batch)}))`;
  let total = 0;
  for (let i = 0; i < maxBatches; i++) {
    const res = await pool.query(sql, [spec.cutoff]);
    const n = res.rowCount ?? 0;
    total += n;
    if (n < batch) break;
  }
  return total;
}

/** Rows deleted since the last VACUUM, as a share of the live rows, that call for the next one (autovacuum's default). */
const VACUUM_SCALE = 0.2;
const VACUUM_MIN_ROWS = 1_000;

/** autovacuum_vacuum_cost_delay's default since PostgreSQL 12. */
const VACUUM_COST_DELAY_MS = 2;

/**
 * A plain VACUUM (ANALYZE) of each table (identifiers quoted already), paced as autovacuum paces
 * itself (its default cost delay) on a connection of its own: an unpaced VACUUM of the read
 * model's day partition under load took a core for seconds, and the pipeline's latency rose a
 * hundredfold while it ran (`pnpm bench --rate 1000`, 7 December). No rewrite, no lock that
 * blocks readers or writers.
 */
export async function vacuumPaced(pool: Pool, tables: readonly string[]): Promise<void> {
  if (tables.length === 0) return;
  const client = await pool.connect();
  try {
    await client.query(`SET vacuum_cost_delay = '${VACUUM_COST_DELAY_MS}ms'`);
    for (const table of tables) await client.query(`VACUUM (ANALYZE) ${table}`);
  } finally {
    await client.query('RESET vacuum_cost_delay').catch(() => undefined);
    client.release();
  }
}

/**
 * A table its owner purges in batches (purgeInBatches), made to reuse the space it frees.
 * PostgreSQL's autovacuum does that where it runs, but a server can have it off — the one this
 * project's CI uses does — and then every deleted row stays on disk: `pnpm soak` (6 December)
 * found `idempotency_keys` at 138 MB for 70,000 live rows and 650,000 dead ones, the one table
 * that kept growing. So once the rows purged since the last vacuum reach a fifth of the live
 * ones (autovacuum's own default threshold), the purger runs a plain VACUUM of the table: no
 * rewrite, no lock that blocks readers or writers, and little work where autovacuum already ran.
 */
export class TablePurger {
  private sinceVacuum = 0;

  constructor(
    private readonly pool: Pool,
    private readonly spec: Omit<PurgeSpec, 'cutoff'>,
  ) {}

  /** Deletes the rows older than `cutoff`, then vacuums when enough were deleted; returns the rows deleted. */
  async purge(cutoff: Date): Promise<number> {
    const deleted = await purgeInBatches(this.pool, { ...this.spec, cutoff });
    this.sinceVacuum += deleted;
    if (this.sinceVacuum >= VACUUM_MIN_ROWS && this.sinceVacuum >= VACUUM_SCALE * (await this.liveRows())) {
      await vacuumPaced(this.pool, [quoteIdent(this.spec.table)]);
      this.sinceVacuum = 0;
    }
    return deleted;
  }

  private async liveRows(): Promise<number> {
    const res = await this.pool.query<{ n: string | null }>('SELECT n_live_tup AS n FROM pg_stat_user_tables WHERE relid = to_regclass($1)', [this.spec.table]);
    return Number(res.rows[0]?.n ?? 0);
  }
}

/** now − `retentionS`: the creation time before which rows are no longer kept. */
export function retentionCutoff(retentionS: number, now: number = Date.now()): Date {
  return new Date(now - retentionS * 1000);
}

/**
 * How often a retention job looks: a quarter of the period it keeps data for, between 1 s and
 * an hour (a 7-day retention is checked hourly; a 20 s one in a test every 5 s).
 */
export function retentionCheckMs(periodS: number): number {
  return Math.min(3_600_000, Math.max(1_000, Math.floor((periodS * 1000) / 4)));
}
