import { ReachError } from '@reach/core';
import type { Pool } from '@reach/store';

/**
 * Agent tokens the registry issued (PostgreSQL `issued_tokens`, migration 007) and revoked
 * (`revoked_tokens`, migration 004). Tokens are verified locally by ingress, dispatcher and
 * registry (HMAC); revocation is by token id (jti), so to revoke "every token of an agent"
 * the registry must know which ids it gave that agent: each is recorded before the token is
 * handed out. Rows are only needed until the token would have expired anyway.
 */
export interface RevokedRow {
  jti: string;
  agent_id: string;
  /** epoch ms */
  expires_at: number;
}

async function dependency<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw new ReachError('DEPENDENCY_UNAVAILABLE', `postgresql: ${what} failed: ${(err as Error).message}`, { cause: err });
  }
}

interface Row {
  jti: string;
  agent_id: string;
  expires_at: Date;
}

const toRevoked = (r: Row): RevokedRow => ({ jti: r.jti, agent_id: r.agent_id, expires_at: r.expires_at.getTime() });

export class TokenStore {
  constructor(private readonly pg: Pool) {}

  /** Records a token about to be handed out (without the row it could not be revoked by agent). */
  async issued(jti: string, agentId: string, expiresAtMs: number): Promise<void> {
    await dependency('recording an issued token', () =>
      this.pg.query('INSERT INTO issued_tokens (jti, agent_id, expires_at) VALUES ($1, $2, $3) ON CONFLICT (jti) DO NOTHING', [
        jti,
        agentId,
        new Date(expiresAtMs),
      ]),
    );
  }

  /** Revokes every unexpired token of an agent; returns the tokens revoked by this call. */
  async revokeAgent(agentId: string): Promise<RevokedRow[]> {
    const res = await dependency('revoking tokens', () =>
      this.pg.query<Row>(
        `INSERT INTO revoked_tokens (jti, agent_id, expires_at)
         SELECT jti, agent_id, expires_at FROM issued_tokens WHERE agent_id = $1 AND expires_at > now()
         ON CONFLICT (jti) DO NOTHING
         RETURNING jti, agent_id, expires_at`,
        [agentId],
      ),
    );
    return res.rows.map(toRevoked);
  }

  /**
   * Revokes one token by id. 'revoked' (now), 'already' (it was), or 'unknown': no live token
   * with this id was issued (an expired token needs no revocation).
   */
  async revokeOne(jti: string): Promise<{ outcome: 'revoked' | 'already'; token: RevokedRow } | { outcome: 'unknown' }> {
    return dependency('revoking a token', async () => {
      const res = await this.pg.query<Row>(
        `INSERT INTO revoked_tokens (jti, agent_id, expires_at)
         SELECT jti, agent_id, expires_at FROM issued_tokens WHERE jti = $1 AND expires_at > now()
         ON CONFLICT (jti) DO NOTHING
         RETURNING jti, agent_id, expires_at`,
        [jti],
      );
      if (res.rows[0]) return { outcome: 'revoked', token: toRevoked(res.rows[0]) };
      const before = await this.pg.query<Row>('SELECT jti, agent_id, expires_at FROM revoked_tokens WHERE jti = $1 AND expires_at > now()', [jti]);
      return before.rows[0] ? { outcome: 'already', token: toRevoked(before.rows[0]) } : { outcome: 'unknown' };
    });
  }

  /** Forgets tokens that expired more than `graceS` ago (issued and revoked); returns how many rows went. */
  async purgeExpired(graceS: number): Promise<number> {
    return dependency('purging expired tokens', async () => {
      const a = await this.pg.query('DELETE FROM issued_tokens WHERE expires_at < now() - make_interval(secs => $1)', [graceS]);
      const b = await this.pg.query('DELETE FROM revoked_tokens WHERE expires_at < now() - make_interval(secs => $1)', [graceS]);
      return (a.rowCount ?? 0) + (b.rowCount ?? 0);
    });
  }
}
