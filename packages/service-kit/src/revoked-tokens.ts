import type { Logger } from '@reach/core';
import type { Pool } from '@reach/store';

/** A revoked agent token as verifiers see it. */
export interface RevokedToken {
  readonly jti: string;
  readonly agent_id: string;
}

export interface RevokedTokenViewOptions {
  /** How often PostgreSQL is asked for new revocations [1000 ms]. */
  refreshMs?: number;
  /**
   * Each refresh re-reads rows revoked this long before the newest one seen, so a row whose
   * transaction committed after a later one was read is still found [30 s].
   */
  overlapMs?: number;
  /** Called with the revocations a refresh found for the first time (e.g. to close live connections). */
  onRevoked?: (tokens: readonly RevokedToken[]) => void;
}

interface Row {
  jti: string;
  agent_id: string;
  revoked_at: Date;
  expires_at: Date;
}

/**
 * The revoked agent tokens (PostgreSQL `revoked_tokens`, migration 004) that have not expired
 * yet, kept in memory and followed incrementally — rows revoked since the newest one seen —
 * so checking a token costs no round trip and a refresh reads only what is new. Verifiers
 * (registry, dispatcher) see a revocation within one refresh. When PostgreSQL is away the
 * last list is kept: no token can be revoked meanwhile (revoking writes PostgreSQL), so it is
 * still complete.
 */
export class RevokedTokenView {
  /** jti → expires_at (epoch ms); expired entries are dropped (an expired token fails anyway). */
  private readonly revoked = new Map<string, number>();
  /** The newest revoked_at read, in PostgreSQL's clock; until a row is seen, every refresh reads the whole (empty) list. */
  private newest: Date | undefined;
  private timer: NodeJS.Timeout | undefined;
  private refreshing: Promise<void> | undefined;
  private failing = false;
  private lastPruneMs = 0;
  private readonly refreshMs: number;
  private readonly overlapMs: number;

  constructor(
    private readonly pg: Pool,
    private readonly log: Logger,
    private readonly opts: RevokedTokenViewOptions = {},
  ) {
    this.refreshMs = opts.refreshMs ?? 1000;
    this.overlapMs = opts.overlapMs ?? 30_000;
  }

  /** Loads the list once (so the first checks already see it), then follows it. */
  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.refreshMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  has(jti: string): boolean {
    return this.revoked.has(jti);
  }

  /** Records a revocation made by this process at once, before the next refresh reads it back. */
  add(jti: string, expiresAtMs: number): void {
    this.revoked.set(jti, expiresAtMs);
  }

  get size(): number {
    return this.revoked.size;
  }

  /** Reads what is new now (also run by the timer); concurrent calls share one query. */
  refresh(): Promise<void> {
    this.refreshing ??= this.load()
      .catch((err: unknown) => {
        // One warning per outage, not one per second.
        if (!this.failing) this.log.warn({ err }, 'cannot read revoked tokens; keeping the last list');
        this.failing = true;
      })
      .finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async load(): Promise<void> {
    const res =
      this.newest === undefined
        ? await this.pg.query<Row>('SELECT jti, agent_id, revoked_at, expires_at FROM revoked_tokens WHERE expires_at > now()')
        : await this.pg.query<Row>(
            'SELECT jti, agent_id, revoked_at, expires_at FROM revoked_tokens WHERE revoked_at > $1::timestamptz - make_interval(secs => $2) AND expires_at > now()',
            [this.newest, this.overlapMs / 1000],
          );
    if (this.failing) this.log.info('revoked tokens readable again');
    this.failing = false;
    const fresh: RevokedToken[] = [];
    for (const row of res.rows) {
      if (this.newest === undefined || row.revoked_at > this.newest) this.newest = row.revoked_at;
      const known = this.revoked.has(row.jti);
      this.revoked.set(row.jti, row.expires_at.getTime());
      if (!known) fresh.push({ jti: row.jti, agent_id: row.agent_id });
    }
    const now = Date.now();
    if (now - this.lastPruneMs >= 60_000) {
      this.lastPruneMs = now;
      for (const [jti, exp] of this.revoked) if (exp <= now) this.revoked.delete(jti);
    }
    if (fresh.length > 0) this.opts.onRevoked?.(fresh);
  }
}
