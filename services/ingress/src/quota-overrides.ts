import type { Logger } from '@reach/core';
import type { Pool } from '@reach/store';
import type { QuotaLimit } from './quota-limits.js';

/** One row of the `quotas` table (migration 004). */
export interface QuotaRow {
  readonly agentId: string;
  readonly limit: QuotaLimit;
  readonly updatedAt: Date;
  readonly updatedBy: string | null;
}

interface DbRow {
  agent_id: string;
  rate_per_s: number;
  burst: number;
  updated_at: Date;
  updated_by: string | null;
}

const toRow = (r: DbRow): QuotaRow => ({
  agentId: r.agent_id,
  limit: { ratePerS: Number(r.rate_per_s), burst: Number(r.burst) },
  updatedAt: r.updated_at,
  updatedBy: r.updated_by,
});

// A digest of the whole table's content: a reload happens only when some row changed. Content,
// not max(updated_at), so an update whose statement time is older than one already seen (it
// waited on a lock) is not missed.
const FINGERPRINT_SQL = `
SELECT count(*)::text || ':' || coalesce(sum(hashtextextended(agent_id || '/' || rate_per_s::text || '/' || burst::text, 0)::numeric), 0)::text AS fp
  FROM quotas`;

/**
 * Per-agent quota overrides (R-D7, docs/design.md §3 `PUT /v1/quotas/{agent_id}`). PostgreSQL
 * `quotas` is the source of truth: a change survives restarts and is seen by every instance.
 * Each instance keeps the table in memory, so admitting a message costs no database call, and
 * polls a digest of it every REACH_QUOTA_REFRESH_MS (≤ 1 s): any change — made through any
 * instance, or in SQL by hand — applies everywhere within that period. The instance that takes a
 * PUT or DELETE applies it at once. The limits travel to the Redis bucket script with every
 * call, so there is no second copy in Redis to drift from PostgreSQL, and the local fallback
 * buckets (Redis down) honour the overrides too. A failed refresh keeps the last known table.
 */
export class QuotaOverrides {
  private view = new Map<string, QuotaLimit>();
  private fingerprint: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private refreshing: Promise<void> | undefined;
  /** Bumped by every local write: a reload that started before one would bring back stale rows. */
  private writes = 0;
  private loaded = false;

  constructor(
    private readonly pg: Pool,
    readonly defaults: QuotaLimit,
    private readonly log: Logger,
    private readonly refreshMs: number,
  ) {}

  /** Loads the table once (the first messages already see the overrides), then keeps it fresh. */
  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.refreshMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Has the table been read at least once (readiness: a default must not stand in for an override). */
  get ready(): boolean {
    return this.loaded;
  }

  /** The quota that applies to a producer on this instance now. */
  limitFor(agentId: string): QuotaLimit {
    return this.view.get(agentId) ?? this.defaults;
  }

  /** Whether this instance applies an override for the agent (else the default). */
  hasOverride(agentId: string): boolean {
    return this.view.has(agentId);
  }

  async get(agentId: string): Promise<QuotaRow | undefined> {
    const res = await this.pg.query<DbRow>('SELECT agent_id, rate_per_s, burst, updated_at, updated_by FROM quotas WHERE agent_id = $1', [agentId]);
    return res.rows[0] ? toRow(res.rows[0]) : undefined;
  }

  /** Overrides in agent id order, `limit` at most, after the `after` agent id (paging). */
  async list(limit: number, after?: string): Promise<QuotaRow[]> {
    const res = await this.pg.query<DbRow>(
      `SELECT agent_id, rate_per_s, burst, updated_at, updated_by FROM quotas
        WHERE ($1::text IS NULL OR agent_id > $1) ORDER BY agent_id LIMIT $2`,
      [after ?? null, limit],
    );
    return res.rows.map(toRow);
  }

  async set(agentId: string, limit: QuotaLimit, by: string): Promise<QuotaRow> {
    const res = await this.pg.query<DbRow>(
      `INSERT INTO quotas (agent_id, rate_per_s, burst, updated_by) VALUES ($1, $2, $3, $4)
       ON CONFLICT (agent_id) DO UPDATE SET rate_per_s = excluded.rate_per_s, burst = excluded.burst, updated_at = now(), updated_by = excluded.updated_by
       RETURNING agent_id, rate_per_s, burst, updated_at, updated_by`,
      [agentId, limit.ratePerS, limit.burst, by],
    );
    const row = toRow(res.rows[0]!);
    this.writes++;
    this.view.set(agentId, row.limit);
    this.log.info({ agent_id: agentId, rate_per_s: limit.ratePerS, burst: limit.burst, by }, 'quota override set');
    return row;
  }

  /** Back to the default; true when there was an override. */
  async remove(agentId: string, by: string): Promise<boolean> {
    const res = await this.pg.query('DELETE FROM quotas WHERE agent_id = $1', [agentId]);
    this.writes++;
    this.view.delete(agentId);
    const removed = (res.rowCount ?? 0) > 0;
    if (removed) this.log.info({ agent_id: agentId, by }, 'quota override removed; the default applies');
    return removed;
  }

  private refresh(): Promise<void> {
    this.refreshing ??= this.reload()
      .catch((err: unknown) => this.log.warn({ err }, 'could not refresh quota overrides; keeping the previous ones'))
      .finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async reload(): Promise<void> {
    const writesBefore = this.writes;
    const fp = (await this.pg.query<{ fp: string }>(FINGERPRINT_SQL)).rows[0]?.fp;
    if (fp !== undefined && fp === this.fingerprint) return;
    const res = await this.pg.query<DbRow>('SELECT agent_id, rate_per_s, burst, updated_at, updated_by FROM quotas');
    // A PUT/DELETE on this instance landed meanwhile: this snapshot may predate it. The next
    // tick reloads (the fingerprint is left unchanged so it does).
    if (this.writes !== writesBefore) return;
    this.view = new Map(res.rows.map((r) => [r.agent_id, toRow(r).limit]));
    this.fingerprint = fp;
    this.loaded = true;
  }
}
