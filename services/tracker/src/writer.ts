import { ReachError, ERROR } from '@reach/core';
import type { Pool } from '@reach/store';
import { type FoldedBatch, type MessageUpsert } from './fold.js';

type Column<R> = readonly [name: keyof R & string, pgType: string];

const MESSAGE_COLUMNS: ReadonlyArray<Column<MessageUpsert>> = [
  ['message_id', 'text'],
  ['created_at', 'timestamptz'],
  ['updated_at', 'timestamptz'],
  ['status', 'text'],
  ['attempt', 'int'],
  ['message_type', 'text'],
  ['producer', 'text'],
  ['capability', 'text'],
  ['topic', 'text'],
  ['target_agent_id', 'text'],
  ['agent_id', 'text'],
  ['parent_message_id', 'text'],
  ['trace_id', 'text'],
  ['request_id', 'text'],
  ['session_id', 'text'],
  ['correlation_id', 'text'],
  ['reply_to', 'text'],
  ['idempotency_key', 'text'],
  ['priority', 'text'],
  ['expire_at', 'timestamptz'],
  ['code', 'int'],
  ['reason', 'text'],
  ['result', 'jsonb'],
  ['rule', 'text'],
  ['timeline', 'jsonb'],
];

const TIME_COLUMNS = new Set(['created_at', 'updated_at', 'expire_at']);

/** `unnest($n::type[], …)` over the columns, numbering parameters from `first`. */
function unnest<R>(columns: ReadonlyArray<Column<R>>, first: number): string {
  return `unnest(${columns.map(([, type], i) => `$${first + i}::${type}[]`).join(', ')})`;
}

/** One array per column: the statement's parameter count never depends on the batch size. */
function arrays<R>(columns: ReadonlyArray<Column<R>>, rows: readonly R[]): unknown[][] {
  return columns.map(([name]) =>
    rows.map((r) => {
      const v = r[name] as unknown;
      return TIME_COLUMNS.has(name) && typeof v === 'number' ? new Date(v).toISOString() : (v ?? null);
    }),
  );
}

// The event moves the message forward: a later attempt, or a later state of the same attempt;
// around a cancel (DEAD 3007), isAhead's rule in fold.ts: nothing moves a canceled message on,
// and a cancel beats any state that is not terminal, whatever its attempt.
const CUR_CANCELED = `(cur.status = 'DEAD' AND cur.code IS NOT DISTINCT FROM ${ERROR.CANCELED})`;
const CANCELS = `(excluded.status = 'DEAD' AND excluded.code IS NOT DISTINCT FROM ${ERROR.CANCELED} AND cur.state_rank < 3)`;
const ADVANCES = `(NOT ${CUR_CANCELED} AND (${CANCELS} OR (excluded.attempt, excluded.state_rank) > (cur.attempt, cur.state_rank)))`;
const whenAdvancing = (col: string, value = `excluded.${col}`) => `${col} = CASE WHEN ${ADVANCES} THEN ${value} ELSE cur.${col} END`;
// A later PENDING of the same attempt says why the message waits (the router's parked 2001 or
// held 2002 after ingress's PENDING): its code and reason replace the earlier ones (isRefinement
// in fold.ts). Before, the row kept ingress's bare PENDING, so `reach status` of a parked message
// said only PENDING and the stuck sweep did not see it was parked (issue #25).
const REFINES = `(excluded.attempt = cur.attempt AND cur.status = 'PENDING' AND excluded.status = 'PENDING' AND excluded.updated_at >= cur.updated_at)`;
const whenAdvancingOrRefining = (col: string) => `${col} = CASE WHEN ${ADVANCES} OR ${REFINES} THEN excluded.${col} ELSE cur.${col} END`;
// Identity fields never change once known; '' marks a NOT NULL one an event did not carry.
const keepKnown = (col: string) => `${col} = CASE WHEN cur.${col} = '' THEN excluded.${col} ELSE cur.${col} END`;
const keepFirst = (col: string) => `${col} = COALESCE(cur.${col}, excluded.${col})`;

// Timeline entries of the incoming row (`excluded`) that the stored one (`cur`) does not hold,
// by event id (entry[0]): a redelivered event is recorded once (migration 012 has the layout).
const NEW_ENTRIES = `(SELECT e FROM jsonb_array_elements(excluded.timeline) e
                      WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements(cur.timeline) c WHERE c->0 = e->0))`;

/**
 * One statement per batch, one round trip, one row written per message: the messages upsert,
 * which appends the batch's new timeline entries to the row's `timeline` (duplicates skipped by
 * event id) and moves its status only when the batch moves it forward in (attempt, state_rank),
 * so late or repeated events never move it back; a handler's result is recorded whatever the
 * order (first result wins). `fresh` names the events the read model did not hold as this
 * statement began, for the outcome metrics (two tracker instances racing on one message may
 * both count an event; the row holds it once).
 */
export const WRITE_SQL = `
WITH input AS (
  SELECT * FROM ${unnest(MESSAGE_COLUMNS, 1)} AS i(${MESSAGE_COLUMNS.map(([n]) => n).join(', ')})
), fresh AS (
  SELECT e->>2 AS state, (e->>3)::int AS attempt, (e->>1)::float8 / 1000 - extract(epoch FROM i.created_at) AS age_s
    FROM input i CROSS JOIN LATERAL jsonb_array_elements(i.timeline) e
   WHERE NOT EXISTS (SELECT 1 FROM messages m CROSS JOIN LATERAL jsonb_array_elements(m.timeline) c
                      WHERE m.message_id = i.message_id AND m.created_at = i.created_at AND c->0 = e->0)
), msg AS (
  INSERT INTO messages AS cur (${MESSAGE_COLUMNS.map(([n]) => n).join(', ')})
  SELECT * FROM input
  ON CONFLICT (message_id, created_at) DO UPDATE SET
    ${[
      `updated_at = CASE WHEN ${ADVANCES} THEN excluded.updated_at ELSE GREATEST(cur.updated_at, excluded.updated_at) END`,
      whenAdvancing('status'),
      whenAdvancing('attempt'),
      // The agent of the current attempt: a new attempt starts without one.
      whenAdvancing('agent_id', 'CASE WHEN excluded.attempt > cur.attempt THEN excluded.agent_id ELSE COALESCE(excluded.agent_id, cur.agent_id) END'),
      whenAdvancingOrRefining('code'),
      whenAdvancingOrRefining('reason'),
      whenAdvancing('rule', 'COALESCE(excluded.rule, cur.rule)'),
      'result = COALESCE(cur.result, excluded.result)',
      `timeline = cur.timeline || COALESCE((SELECT jsonb_agg(n.e) FROM ${NEW_ENTRIES} n), '[]'::jsonb)`,
      ...['message_type', 'producer', 'trace_id'].map(keepKnown),
      ...[
        'capability',
        'topic',
        'target_agent_id',
        'parent_message_id',
        'request_id',
        'session_id',
        'correlation_id',
        'reply_to',
        'idempotency_key',
        'expire_at',
      ].map(keepFirst),
    ].join(',\n    ')}
  WHERE ${ADVANCES} OR ${REFINES} OR (excluded.result IS NOT NULL AND cur.result IS NULL) OR EXISTS ${NEW_ENTRIES}
  RETURNING 1
)
SELECT (SELECT count(*) FROM msg)::int AS messages,
       (SELECT count(*) FROM fresh)::int AS events,
       (SELECT coalesce(json_agg(x), '[]'::json)
          FROM (SELECT state, attempt = 0 AS first_attempt, count(*)::int AS n,
                       -- end-to-end seconds of terminal events, for the latency histogram
                       coalesce(array_agg(age_s) FILTER (WHERE state IN ('DELIVERED', 'REJECTED', 'DEAD')), '{}') AS ages_s
                  FROM fresh GROUP BY 1, 2) x) AS new_events`;

export interface WriteResult {
  /** Message rows inserted or moved forward. */
  messages: number;
  /** Timeline entries appended (not seen before). */
  events: number;
  /** New timeline events by state and first attempt; ages_s: created_at → event, seconds, of terminal ones. */
  newEvents: Array<{ state: string; first_attempt: boolean; n: number; ages_s: number[] }>;
}

export class ReadModelWriter {
  constructor(private readonly pg: Pool) {}

  /** created_at of messages the read model already holds (for events that do not carry it). */
  async knownCreatedAt(messageIds: readonly string[]): Promise<Map<string, number>> {
    if (messageIds.length === 0) return new Map();
    const res = await this.pg.query<{ message_id: string; created_at: Date }>(
      'SELECT message_id, min(created_at) AS created_at FROM messages WHERE message_id = ANY($1::text[]) GROUP BY message_id',
      [messageIds],
    );
    return new Map(res.rows.map((r) => [r.message_id, r.created_at.getTime()]));
  }

  async write(batch: FoldedBatch): Promise<WriteResult> {
    if (batch.messages.length === 0) return { messages: 0, events: 0, newEvents: [] };
    const params = arrays(MESSAGE_COLUMNS, batch.messages);
    const res = await this.pg.query<{ messages: number; events: number; new_events: WriteResult['newEvents'] }>(WRITE_SQL, params);
    const row = res.rows[0];
    if (!row) throw new ReachError('INTERNAL', 'the read model write returned no summary row');
    return { messages: row.messages, events: row.events, newEvents: row.new_events };
  }
}
