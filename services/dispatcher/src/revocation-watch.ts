import { ReachError, verifyToken, type Logger, type TokenClaims, type TokenSecret } from '@reach/core';
import { RevokedTokenView } from '@reach/service-kit';
import type { Pool } from '@reach/store';

/** How often new revocations are read; an open connection with a revoked token closes within about this long. */
const REFRESH_MS = 1000;

/** What the watch needs of a connection. */
export interface WatchedConnection {
  readonly tokenId: string | undefined;
  authFailed(reason: string): void;
}

/**
 * Token revocation on the WebSocket path (R-C2): checked at hello (and at a token
 * renewal) against PostgreSQL, and followed afterwards, so an open connection whose token is
 * revoked is closed with 4003 within about a second (a check at connect alone would let a
 * revoked agent keep its socket for as long as it likes). The in-memory view also answers
 * when PostgreSQL cannot: no token can be revoked while it is away, so the view is complete.
 */
export class RevocationWatch {
  private readonly view: RevokedTokenView;

  constructor(
    private readonly pg: Pool,
    private readonly log: Logger,
    private readonly connections: () => Iterable<WatchedConnection>,
  ) {
    this.view = new RevokedTokenView(pg, log, { refreshMs: REFRESH_MS, onRevoked: () => this.closeRevoked() });
  }

  start(): void {
    void this.view.start();
  }

  stop(): void {
    this.view.stop();
  }

  /** Exact at this moment (PostgreSQL); the view when PostgreSQL does not answer. */
  async isRevoked(jti: string): Promise<boolean> {
    if (this.view.has(jti)) return true;
    try {
      const r = await this.pg.query('SELECT 1 FROM revoked_tokens WHERE jti = $1 LIMIT 1', [jti]);
      return (r.rowCount ?? 0) > 0;
    } catch (err) {
      this.log.debug({ err }, 'revocation check fell back to the in-memory list');
      return false;
    }
  }

  /** A `refresh_token` frame's token: signed, unexpired, the connection's own agent, not revoked. */
  async verifyRenewal(agentId: string, token: string, secret: TokenSecret): Promise<TokenClaims> {
    const claims = verifyToken(token, secret);
    if (claims.sub !== agentId) throw new ReachError('AUTH_FAILED', `the new token belongs to agent ${claims.sub}, not ${agentId}`);
    if (await this.isRevoked(claims.jti)) throw new ReachError('AUTH_FAILED', 'the new token has been revoked');
    return claims;
  }

  /** Closes every connection running on a revoked token (run when a refresh found new revocations). */
  closeRevoked(): number {
    let closed = 0;
    for (const conn of this.connections()) {
      const jti = conn.tokenId;
      if (jti !== undefined && this.view.has(jti)) {
        conn.authFailed('token revoked');
        closed++;
      }
    }
    if (closed > 0) this.log.info({ closed }, 'closed connections whose token was revoked');
    return closed;
  }
}
