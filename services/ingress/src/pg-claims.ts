import { ReachError } from '@reach/core';
import type { Pool } from '@reach/store';

/** At most this many claims go into one statement. */
const MAX_BATCH = 500;

// One statement for a batch of claims: take each key (or an expired row of it), else report
// who holds it. A key named twice in the batch is inserted once (by its first claimant; the
// others are told that one holds it) since one INSERT … ON CONFLICT may not touch a row twice.
// Keys are inserted in sorted order, so concurrent batches lock rows in the same order and
// never deadlock. The fallback SELECT sees the snapshot from before the statement: a holder
// that committed during it is found by asking again.
const CLAIM_MANY_SQL = `
WITH input AS (
  SELECT DISTINCT ON (producer, idempotency_key) producer, idempotency_key, message_id
    FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS t(producer, idempotency_key, message_id, n)
   ORDER BY producer, idempotency_key, n
),
claimed AS (
  INSERT INTO idempotency_keys (producer, idempotency_key, message_id, expires_at)
  SELECT producer, idempotency_key, message_id, now() + make_interval(secs => $4) FROM input ORDER BY producer, idempotency_key
  ON CONFLICT (producer, idempotency_key) DO UPDATE
    SET message_id = excluded.message_id, created_at = now(), expires_at = excluded.expires_at
    WHERE idempotency_keys.expires_at <= now()
  RETURNING producer, idempotency_key, message_id
)
SELECT producer, idempotency_key, message_id FROM claimed
UNION ALL
SELECT k.producer, k.idempotency_key, k.message_id
  FROM idempotency_keys k JOIN input i USING (producer, idempotency_key)
 WHERE NOT EXISTS (SELECT 1 FROM claimed c WHERE c.producer = k.producer AND c.idempotency_key = k.idempotency_key)`;

interface Claim {
  producer: string;
  key: string;
  messageId: string;
  resolve(holder: string): void;
  reject(err: unknown): void;
}

const slot = (producer: string, key: string): string => `${producer}\n${key}`;

/**
 * The durable copy of idempotency keys (PostgreSQL `idempotency_keys`, unique on producer +
 * key), claimed in batches: every claim asked for while the event loop runs one turn goes into
 * one statement (up to 500), like a group commit. Under load that is one round trip and one
 * statement for a whole Kafka batch of ingress instead of one per message — the statement,
 * not the row, is what costs PostgreSQL and this process most.
 */
export class PgClaims {
  private pending: Claim[] = [];

  constructor(
    private readonly pg: Pool,
    private readonly ttlS: number,
  ) {}

  /** The message that holds the key after this claim: `messageId` itself when it took it. */
  claim(producer: string, key: string, messageId: string): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      if (this.pending.length === 0) setImmediate(() => void this.flush());
      this.pending.push({ producer, key, messageId, resolve, reject });
    });
  }

  private async flush(): Promise<void> {
    const all = this.pending;
    this.pending = [];
    for (let i = 0; i < all.length; i += MAX_BATCH) await this.settle(all.slice(i, i + MAX_BATCH));
  }

  private async settle(batch: readonly Claim[]): Promise<void> {
    let waiting = batch;
    // A holder that committed while a statement ran is invisible to it: ask again for those.
    for (let tries = 0; tries < 3 && waiting.length > 0; tries++) {
      let holders: Map<string, string>;
      try {
        holders = await this.claimMany(waiting);
      } catch (err) {
        for (const c of waiting) c.reject(err);
        return;
      }
      const unanswered: Claim[] = [];
      for (const c of waiting) {
        const holder = holders.get(slot(c.producer, c.key));
        if (holder === undefined) unanswered.push(c);
        else c.resolve(holder);
      }
      waiting = unanswered;
    }
    for (const c of waiting) c.reject(new ReachError('DEPENDENCY_UNAVAILABLE', 'idempotency key could neither be claimed nor read'));
  }

  private async claimMany(batch: readonly Claim[]): Promise<Map<string, string>> {
    const res = await this.pg.query<{ producer: string; idempotency_key: string; message_id: string }>(CLAIM_MANY_SQL, [
      batch.map((c) => c.producer),
      batch.map((c) => c.key),
      batch.map((c) => c.messageId),
      this.ttlS,
    ]);
    return new Map(res.rows.map((r) => [slot(r.producer, r.idempotency_key), r.message_id]));
  }
}
