import type { Pool } from '@reach/store';
import type { EntryInsert, EntryRow } from './entry.js';
import { whereClause, type EntryFilter } from './filters.js';

type Column = readonly [name: keyof EntryInsert, pgType: string];

const COLUMNS: readonly Column[] = [
  ['dlq_id', 'text'],
  ['message_id', 'text'],
  ['reason', 'text'],
  ['code', 'int'],
  ['error', 'text'],
  ['service', 'text'],
  ['source_topic', 'text'],
  ['source_partition', 'int'],
  ['source_offset', 'bigint'],
  ['attempts', 'int'],
  ['producer', 'text'],
  ['trace_id', 'text'],
  ['capability', 'text'],
  ['message_type', 'text'],
  ['history', 'jsonb'],
  ['envelope', 'bytea'],
  ['envelope_json', 'jsonb'],
  ['created_at', 'timestamptz'],
  ['traceparent', 'text'],
];

/**
 * One multi-row statement per batch, one array parameter per column (the parameter count never
 * depends on the batch size). A record read again after a crash conflicts on its dlq_id and is
 * skipped, so every dead letter is stored once. (Source positions are not unique over time:
 * migration 005.)
 */
export const INSERT_SQL = `
INSERT INTO dead_letters (${COLUMNS.map(([n]) => n).join(', ')}, updated_at)
SELECT *, now() FROM unnest(${COLUMNS.map(([, t], i) => `$${i + 1}::${t}[]`).join(', ')})
ON CONFLICT DO NOTHING
RETURNING reason`;

/** What a lifecycle change appends to an entry's history (the audit trail of replays and sweeps). */
export interface HistoryEvent {
  event: 'REPLAYED' | 'DEAD' | 'PURGED';
  at: string;
  [k: string]: unknown;
}

const appendHistory = (param: string) => `history = history || jsonb_build_array(${param}::jsonb)`;

/** The dead_letters table: the dead-letter service is its only writer (docs/design.md §1). */
export class DeadLetterStore {
  constructor(private readonly pg: Pool) {}

  /** Inserts a batch; returns the reasons of the rows actually inserted (for metrics). */
  async insert(rows: readonly EntryInsert[]): Promise<string[]> {
    if (rows.length === 0) return [];
    const params = COLUMNS.map(([name]) => rows.map((r) => r[name] ?? null));
    const res = await this.pg.query<{ reason: string }>(INSERT_SQL, params);
    return res.rows.map((r) => r.reason);
  }

  async get(id: string): Promise<EntryRow | undefined> {
    const res = await this.pg.query<EntryRow>('SELECT * FROM dead_letters WHERE dlq_id = $1', [id]);
    return res.rows[0];
  }

  /** Newest first; `columns` '*' or a narrower list. */
  async list(filter: EntryFilter, limit: number): Promise<EntryRow[]> {
    const w = whereClause(filter);
    const res = await this.pg.query<EntryRow>(
      `SELECT * FROM dead_letters WHERE ${w.sql} ORDER BY created_at DESC, dlq_id DESC LIMIT ${Math.trunc(limit)}`,
      w.params,
    );
    return res.rows;
  }

  /** Bulk replay candidates: oldest first (a redrive keeps the original order), PARKED or DEAD unless a status is given. */
  async replayCandidates(filter: EntryFilter, limit: number): Promise<Array<Pick<EntryRow, 'dlq_id' | 'envelope_json' | 'status'>>> {
    const w = whereClause(filter);
    const statusSql = filter.status === undefined ? ` AND status IN ('PARKED', 'DEAD')` : '';
    const res = await this.pg.query<Pick<EntryRow, 'dlq_id' | 'envelope_json' | 'status'>>(
      `SELECT dlq_id, envelope_json, status FROM dead_letters WHERE ${w.sql}${statusSql} ORDER BY created_at, dlq_id LIMIT ${Math.trunc(limit)}`,
      w.params,
    );
    return res.rows;
  }

  /**
   * Claims an entry for a replay: only one caller (instance, redrive or admin) gets the row
   * back, with REPLAYED already set. `from` limits the states it may be claimed from.
   */
  async claimForReplay(id: string, from: readonly string[], event: HistoryEvent): Promise<EntryRow | undefined> {
    const res = await this.pg.query<EntryRow>(
      `UPDATE dead_letters SET status = 'REPLAYED', replay_count = replay_count + 1, replayed_at = now(), updated_at = now(), ${appendHistory('$3')}
        WHERE dlq_id = $1 AND status = ANY($2::text[]) AND envelope_json IS NOT NULL AND envelope IS NOT NULL
        RETURNING *`,
      [id, from, JSON.stringify(event)],
    );
    return res.rows[0];
  }

  /** Gives a claimed entry back when its replay could not be produced. */
  async unclaim(previous: EntryRow): Promise<void> {
    await this.pg.query(
      `UPDATE dead_letters SET status = $2, replay_count = replay_count - 1, replayed_at = $3, history = history - (jsonb_array_length(history) - 1), updated_at = now()
        WHERE dlq_id = $1 AND status = 'REPLAYED'`,
      [previous.dlq_id, previous.status, previous.replayed_at],
    );
  }

  /** The highest attempt the read model knows of a message (the tracker's table, read only); null when it knows none. */
  async lastAttempt(messageId: string): Promise<number | null> {
    const res = await this.pg.query<{ attempt: number | null }>('SELECT max(attempt) AS attempt FROM messages WHERE message_id = $1', [messageId]);
    return res.rows[0]?.attempt ?? null;
  }

  /** Purge keeps the row for audit (status PURGED, raw bytes and payload dropped). */
  async purge(id: string, event: HistoryEvent): Promise<EntryRow | undefined> {
    const res = await this.pg.query<EntryRow>(
      `UPDATE dead_letters SET status = 'PURGED', envelope = NULL,
              envelope_json = CASE WHEN envelope_json IS NULL THEN NULL ELSE envelope_json - 'payload' - 'payload_b64' END,
              updated_at = now(), ${appendHistory('$2')}
        WHERE dlq_id = $1 AND status <> 'PURGED' RETURNING *`,
      [id, JSON.stringify(event)],
    );
    return res.rows[0];
  }

  /** PARKED NO_ROUTE entries that could be redriven: by capability base name, topic or target agent. */
  async parkedNoRoute(match: { capabilityBases: string[]; topics: string[]; agentIds: string[] }, limit: number): Promise<EntryRow[]> {
    const res = await this.pg.query<EntryRow>(
      `SELECT * FROM dead_letters
        WHERE status = 'PARKED' AND reason = 'NO_ROUTE' AND envelope_json IS NOT NULL
          AND (split_part(capability, '@', 1) = ANY($1::text[])
               OR envelope_json->>'topic' = ANY($2::text[])
               OR envelope_json->>'target_agent_id' = ANY($3::text[]))
        ORDER BY created_at, dlq_id LIMIT ${Math.trunc(limit)}`,
      [match.capabilityBases, match.topics, match.agentIds],
    );
    return res.rows;
  }

  /** Marks one PARKED entry DEAD (e.g. its expire_at passed before an agent appeared). */
  async markDead(id: string, event: HistoryEvent): Promise<boolean> {
    const res = await this.pg.query(
      `UPDATE dead_letters SET status = 'DEAD', updated_at = now(), ${appendHistory('$2')} WHERE dlq_id = $1 AND status = 'PARKED'`,
      [id, JSON.stringify(event)],
    );
    return (res.rowCount ?? 0) > 0;
  }

  /** PARKED NO_ROUTE entries whose expire_at passed → DEAD (EXPIRED). */
  async expireParked(event: HistoryEvent): Promise<EntryRow[]> {
    const res = await this.pg.query<EntryRow>(
      `UPDATE dead_letters SET status = 'DEAD', updated_at = now(), ${appendHistory('$1')}
        WHERE status = 'PARKED' AND reason = 'NO_ROUTE' AND envelope_json ? 'expire_at'
          AND jsonb_typeof(envelope_json->'expire_at') = 'string'
          -- Only a plain four-digit-year time is cast: one odd row (stored before the door
          -- refused such expiries) must not fail the whole sweep on every run.
          -- (CASE, because AND does not promise to test the pattern before the cast).
          AND CASE WHEN envelope_json->>'expire_at' ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T'
                   THEN (envelope_json->>'expire_at')::timestamptz <= now() ELSE false END
        RETURNING dlq_id, message_id, trace_id, reason, capability`,
      [JSON.stringify(event)],
    );
    return res.rows;
  }

  /** PARKED entries older than `staleAfterS` → DEAD (the R-D11 sweep). */
  async sweepStale(staleAfterS: number, event: HistoryEvent): Promise<EntryRow[]> {
    const res = await this.pg.query<EntryRow>(
      `UPDATE dead_letters SET status = 'DEAD', updated_at = now(), ${appendHistory('$2')}
        WHERE status = 'PARKED' AND created_at < now() - make_interval(secs => $1)
        RETURNING dlq_id, message_id, trace_id, reason, capability, created_at`,
      [staleAfterS, JSON.stringify(event)],
    );
    return res.rows;
  }
}
