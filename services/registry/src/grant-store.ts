import { ReachError } from '@reach/core';
import type { Pool, PoolClient } from '@reach/store';
import type { DomainGrant, StoredGrant } from './grants.js';

/**
 * Cross-domain grants in PostgreSQL (`grants`, migrations 004 and 007): the source of truth.
 * reach.grants.v1 is the change feed routers follow (grant-feed.ts).
 */

/**
 * Grant changes and their publication hold this session-level advisory lock, across registry
 * instances: whoever publishes last read PostgreSQL last, so the topic cannot end on a stale
 * record (a start-up reconcile re-publishing a grant another instance just revoked).
 * 0x7265616368000002: "reach" in ASCII, then 2 (1 is the migration lock).
 */
const GRANT_LOCK_KEY = '8243101772546048002';

interface Row {
  grant_id: string;
  from_domain: string;
  to_domain: string;
  capability: string | null;
  created_by: string | null;
  created_at: Date;
}

const COLUMNS = 'grant_id, from_domain, to_domain, capability, created_by, created_at';

function fromRow(r: Row): StoredGrant {
  return {
    grant_id: r.grant_id,
    from_domain: r.from_domain,
    to_domain: r.to_domain,
    capability: r.capability,
    created_by: r.created_by,
    created_at: r.created_at.getTime(),
  };
}

/** PostgreSQL failures become 5002 DEPENDENCY_UNAVAILABLE (retryable). */
async function dependency<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ReachError) throw err;
    throw new ReachError('DEPENDENCY_UNAVAILABLE', `postgresql: ${what} failed: ${(err as Error).message}`, { cause: err });
  }
}

export class GrantStore {
  constructor(private readonly pg: Pool) {}

  /** Stores the grant unless it exists (idempotent). `created`: false when it was there already. */
  async put(grant: DomainGrant, createdBy: string): Promise<{ grant: StoredGrant; created: boolean }> {
    return dependency('storing a grant', async () => {
      const inserted = await this.pg.query<Row>(
        `INSERT INTO grants (from_domain, to_domain, capability, created_by) VALUES ($1, $2, $3, $4)
         ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`,
        [grant.from_domain, grant.to_domain, grant.capability, createdBy],
      );
      if (inserted.rows[0]) return { grant: fromRow(inserted.rows[0]), created: true };
      const existing = await this.pg.query<Row>(
        `SELECT ${COLUMNS} FROM grants WHERE from_domain = $1 AND to_domain = $2 AND coalesce(capability, '') = coalesce($3, '')`,
        [grant.from_domain, grant.to_domain, grant.capability],
      );
      // Deleted between the two statements: the caller may simply PUT again.
      if (!existing.rows[0]) throw new ReachError('DEPENDENCY_UNAVAILABLE', 'the grant changed concurrently; send the request again');
      return { grant: fromRow(existing.rows[0]), created: false };
    });
  }

  /** Deletes the grant; false when there was none. */
  async remove(grantId: string): Promise<boolean> {
    const res = await dependency('revoking a grant', () => this.pg.query('DELETE FROM grants WHERE grant_id = $1', [grantId]));
    return (res.rowCount ?? 0) > 0;
  }

  async list(filter: { from_domain?: string; to_domain?: string } = {}): Promise<StoredGrant[]> {
    const res = await dependency('listing grants', () =>
      this.pg.query<Row>(
        `SELECT ${COLUMNS} FROM grants
         WHERE ($1::text IS NULL OR from_domain = $1) AND ($2::text IS NULL OR to_domain = $2)
         ORDER BY from_domain, to_domain, grant_id`,
        [filter.from_domain ?? null, filter.to_domain ?? null],
      ),
    );
    return res.rows.map(fromRow);
  }

  /**
   * Runs `fn` holding the grant lock (on its own connection, released whatever happens: a
   * dead session releases it too). `fn` gets a reader that sees committed grants at call time.
   */
  async withLock<T>(fn: (read: { byIds(ids: readonly string[]): Promise<Map<string, StoredGrant>>; all(): Promise<StoredGrant[]> }) => Promise<T>): Promise<T> {
    const client: PoolClient = await dependency('connecting', () => this.pg.connect());
    let broken = false;
    try {
      try {
        await client.query('SELECT pg_advisory_lock($1::bigint)', [GRANT_LOCK_KEY]);
      } catch (err) {
        broken = true;
        throw new ReachError('DEPENDENCY_UNAVAILABLE', `postgresql: taking the grant lock failed: ${(err as Error).message}`, { cause: err });
      }
      try {
        return await fn({
          byIds: async (ids) => {
            const res = await dependency('reading grants', () => client.query<Row>(`SELECT ${COLUMNS} FROM grants WHERE grant_id = ANY($1::text[])`, [ids]));
            return new Map(res.rows.map((r) => [r.grant_id, fromRow(r)]));
          },
          all: async () => (await dependency('reading grants', () => client.query<Row>(`SELECT ${COLUMNS} FROM grants`))).rows.map(fromRow),
        });
      } finally {
        await client.query('SELECT pg_advisory_unlock($1::bigint)', [GRANT_LOCK_KEY]).catch(() => {
          broken = true; // the session is gone, and the lock with it; never reuse this client
        });
      }
    } finally {
      client.release(broken);
    }
  }
}
