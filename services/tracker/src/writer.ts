import { ReachError } from '@reach/core';
import type { Pool } from '@reach/store';
import { CANCELED_CODE, type EventInsert, type FoldedBatch, type MessageUpsert } from './fold.js';

type Column<R> = readonly [name: keyof R & string, pgType: string];

const EVENT_COLUMNS: ReadonlyArray<Column<EventInsert>> = [
  ['event_id', 'text'],
  ['message_id', 'text'],
  ['created_at', 'timestamptz'],
  ['at', 'timestamptz'],
  ['state', 'text'],
  ['attempt', 'int'],
  ['service', 'text'],
  ['instance', 'text'],
  ['agent_id', 'text'],
  ['code', 'int'],
  ['reason', 'text'],
  ['detail', 'jsonb'],
];

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
];

const TIME_COLUMNS = new Set(['created_at', 'updated_at', 'at', 'expire_at']);

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
const CUR_CANCELED = `(cur.status = 'DEAD' AND cur.code IS NOT DISTINCT FROM ${CANCELED_CODE})`;
const CANCELS = `(excluded.status = 'DEAD' AND excluded.code IS NOT DISTINCT FROM ${CANCELED_CODE} AND cur.state_rank < 3)`;
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

/**
 * One statement per batch, one round trip: the timeline rows (duplicates skipped by event id)
 * and the messages upsert. A message row changes only when the batch moves it forward in
 * (attempt, state_rank), so late or repeated events never move it back; a handler's result is
 * recorded whatever the order (first result wins). Counts come back for the metrics.
 */
export const WRITE_SQL = `
WITH ev AS (
  INSERT INTO message_events (${EVENT_COLUMNS.map(([n]) => n).join(', ')})
  SELECT * FROM ${unnest(EVENT_COLUMNS, 1)}
  ON CONFLICT (event_id, created_at) DO NOTHING
  RETURNING state, attempt, extract(epoch FROM (at - created_at))::float8 AS age_s
), msg AS (
  INSERT INTO messages AS cur (${MESSAGE_COLUMNS.map(([n]) => n).join(', ')})
  SELECT * FROM ${unnest(MESSAGE_COLUMNS, EVENT_COLUMNS.length + 1)}
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
  WHERE ${ADVANCES} OR ${REFINES} OR (excluded.result IS NOT NULL AND cur.result IS NULL)
  RETURNING 1
)
SELECT (SELECT count(*) FROM msg)::int AS messages,
       (SELECT count(*) FROM ev)::int AS events,
       (SELECT coalesce(json_agg(x), '[]'::json)
          FROM (SELECT state, attempt = 0 AS first_attempt, count(*)::int AS n,
                       -- end-to-end seconds of terminal events, for the latency histogram
                       coalesce(array_agg(age_s) FILTER (WHERE state IN ('DELIVERED', 'REJECTED', 'DEAD')), '{}') AS ages_s
                  FROM ev GROUP BY 1, 2) x) AS new_events`;

export interface WriteResult {
  /** Message rows inserted or moved forward. */
  messages: number;
  /** Timeline rows inserted (not seen before). */
  events: number;
  /** The newly inserted events by state and first attempt or not (for outcome metrics). */
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
    if (batch.events.length === 0 && batch.messages.length === 0) return { messages: 0, events: 0, newEvents: [] };
    const params = [...arrays(EVENT_COLUMNS, batch.events), ...arrays(MESSAGE_COLUMNS, batch.messages)];
    const res = await this.pg.query<{ messages: number; events: number; new_events: WriteResult['newEvents'] }>(WRITE_SQL, params);
    const row = res.rows[0];
    if (!row) throw new ReachError('INTERNAL', 'the read model write returned no summary row');
    return { messages: row.messages, events: row.events, newEvents: row.new_events };
  }
}
