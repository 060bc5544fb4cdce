import type { Logger } from '@reach/core';
import type { Pool } from '@reach/store';

/**
 * The ids (jti) of revoked agent tokens that have not expired yet, read from PostgreSQL
 * `revoked_tokens` (migration 004) and refreshed in the background, so checking a token costs
 * no round trip. The table only holds tokens until they would have expired anyway, so it stays
 * small enough to reload whole. A failed refresh keeps the previous list.
 */
export class RevocationView {
  private revoked = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private refreshing: Promise<void> | undefined;

  constructor(
    private readonly pg: Pool,
    private readonly log: Logger,
    private readonly refreshMs = 1000,
  ) {}

  /** Loads the list once (so the first requests already see it), then keeps it fresh. */
  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.refreshMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  has(jti: string): boolean {
    return this.revoked.has(jti);
  }

  private refresh(): Promise<void> {
    this.refreshing ??= this.pg
      .query<{ jti: string }>('SELECT jti FROM revoked_tokens WHERE expires_at > now()')
      .then((res) => {
        this.revoked = new Set(res.rows.map((r) => r.jti));
      })
      .catch((err: unknown) => this.log.warn({ err }, 'could not refresh revoked tokens; keeping the previous list'))
      .finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }
}
