import { errorInfo, isKnownCode, ReachError } from '@reach/core';
import { resultFromJsonb, type MessageColumns, type Pool, type QueryResultRow } from '@reach/store';
import { elapsedMs, stagesOf, traceTree } from './trace-tree.js';

/**
 * Read-only queries on the message read model the tracker writes (migration 001), and the JSON
 * shapes of the public message API (docs/design.md §3): times as RFC 3339, error code with its name.
 */
/** The read-model columns ingress answers with (the message's own fields; correlation ones for traces). */
export type MessageRow = Pick<
  MessageColumns,
  | 'message_id'
  | 'status'
  | 'attempt'
  | 'agent_id'
  | 'code'
  | 'reason'
  | 'updated_at'
  | 'created_at'
  | 'trace_id'
  | 'producer'
  | 'message_type'
  | 'capability'
  | 'topic'
  | 'target_agent_id'
  | 'parent_message_id'
  | 'result'
> &
  Partial<Pick<MessageColumns, 'correlation_id' | 'reply_to'>>;

export interface EventRow {
  message_id: string;
  state: string;
  at: Date;
  attempt: number;
  service: string;
  instance: string | null;
  agent_id: string | null;
  code: number | null;
  reason: string | null;
  detail: unknown;
}

const MESSAGE_COLUMNS = `message_id, status, attempt, agent_id, code, reason, updated_at, created_at, trace_id, producer,
  message_type, capability, topic, target_agent_id, parent_message_id, result`;

// Timeline order: by time, then attempt and lifecycle rank for events stamped in the same
// millisecond by different services, then event id (ULID) for a stable order.
const EVENT_ORDER = `at, attempt,
  CASE state WHEN 'PENDING' THEN 0 WHEN 'ROUTED' THEN 1 WHEN 'DELIVERING' THEN 2
             WHEN 'DELIVERED' THEN 3 WHEN 'REJECTED' THEN 3 WHEN 'DEAD' THEN 3 ELSE 1 END,
  event_id`;

/** One copy of a fan-out, as the answer to a wait on its parent lists it. */
export interface CopyRow {
  message_id: string;
  agent_id: string | null;
  status: string;
  code: number | null;
}

/** The largest number of copies a wait on a fan-out parent lists (the router's ROUTED detail lists as many). */
export const MAX_LISTED_COPIES = 200;

/** The largest number of messages one trace answer lists. */
export const TRACE_LIMIT = 1000;

/** Rows of a read-model query; a failed query is the dependency's fault (5002, retryable), not the caller's. */
export async function queryReadModel<R extends QueryResultRow>(pg: Pool, sql: string, params: unknown[]): Promise<R[]> {
  try {
    return (await pg.query<R>(sql, params)).rows;
  } catch (err) {
    throw new ReachError('DEPENDENCY_UNAVAILABLE', `message read model unavailable: ${(err as Error).message}`, { cause: err });
  }
}

export class ReadModel {
  constructor(private readonly pg: Pool) {}

  private query<R extends QueryResultRow>(sql: string, params: unknown[]): Promise<R[]> {
    return queryReadModel<R>(this.pg, sql, params);
  }

  /** Message rows, with each result as the agent sent it (resultFromJsonb). */
  private async messageRows(sql: string, params: unknown[]): Promise<MessageRow[]> {
    const rows = await this.query<MessageRow>(sql, params);
    for (const r of rows) if (typeof r.result === 'string') r.result = resultFromJsonb(r.result);
    return rows;
  }

  async message(messageId: string): Promise<MessageRow | undefined> {
    // message_id leads the primary key of every (daily) partition: one index probe each.
    const rows = await this.messageRows(`SELECT ${MESSAGE_COLUMNS} FROM messages WHERE message_id = $1 ORDER BY updated_at DESC LIMIT 1`, [messageId]);
    return rows[0];
  }

  async messages(messageIds: readonly string[]): Promise<Map<string, MessageRow>> {
    if (messageIds.length === 0) return new Map();
    const rows = await this.messageRows(`SELECT ${MESSAGE_COLUMNS} FROM messages WHERE message_id = ANY($1::text[])`, [messageIds]);
    return new Map(rows.map((r) => [r.message_id, r]));
  }

  async events(messageIds: readonly string[]): Promise<EventRow[]> {
    if (messageIds.length === 0) return [];
    return this.query<EventRow>(
      `SELECT message_id, state, at, attempt, service, instance, agent_id, code, reason, detail
         FROM message_timeline WHERE message_id = ANY($1::text[]) ORDER BY ${EVENT_ORDER}`,
      [messageIds],
    );
  }

  /** The copies of a fan-out parent (at most MAX_LISTED_COPIES, by id) and how many there are. */
  async copies(parentId: string): Promise<{ copies: CopyRow[]; total: number }> {
    const rows = await this.query<CopyRow & { total: string }>(
      `SELECT message_id, agent_id, status, code, count(*) OVER () AS total
         FROM messages WHERE parent_message_id = $1 ORDER BY message_id LIMIT ${MAX_LISTED_COPIES}`,
      [parentId],
    );
    return { copies: rows.map(({ total: _total, ...c }) => c), total: rows.length === 0 ? 0 : Number(rows[0]!.total) };
  }

  async trace(traceId: string): Promise<MessageRow[]> {
    return this.messageRows(
      `SELECT ${MESSAGE_COLUMNS}, correlation_id, reply_to FROM messages WHERE trace_id = $1 ORDER BY created_at, message_id LIMIT ${TRACE_LIMIT}`,
      [traceId],
    );
  }
}

function iso(t: Date | null): string | null {
  return t === null ? null : t.toISOString();
}

function codeName(code: number | null): string | null {
  return code !== null && isKnownCode(code) ? errorInfo(code).name : null;
}

/** `GET /v1/messages/{id}`. */
export function messageJson(row: MessageRow): Record<string, unknown> {
  const out: Record<string, unknown> = {
    message_id: row.message_id,
    status: row.status,
    attempt: row.attempt,
    agent_id: row.agent_id,
    code: row.code,
    name: codeName(row.code),
    reason: row.reason,
    updated_at: iso(row.updated_at),
    created_at: iso(row.created_at),
    trace_id: row.trace_id,
    producer: row.producer,
    message_type: row.message_type,
    capability: row.capability,
    topic: row.topic,
    target_agent_id: row.target_agent_id,
    parent_message_id: row.parent_message_id,
  };
  if (row.result !== null && row.result !== undefined) out.result = row.result;
  return out;
}

/** One entry of a timeline. */
export function eventJson(row: EventRow): Record<string, unknown> {
  return {
    state: row.state,
    at: iso(row.at),
    attempt: row.attempt,
    service: row.service,
    instance: row.instance,
    agent_id: row.agent_id,
    code: row.code,
    reason: row.reason,
    detail: row.detail ?? null,
  };
}

/**
 * `GET /v1/traces/{trace_id}`: every message of the trace with its timeline, and (fields added
 * to the original answer) each message's stages with their durations, its elapsed time and its
 * links, and the trace as a tree of messages (trace-tree.ts).
 */
export function traceJson(traceId: string, rows: readonly MessageRow[], events: readonly EventRow[]): Record<string, unknown> {
  const byMessage = new Map<string, EventRow[]>();
  for (const e of events) {
    let list = byMessage.get(e.message_id);
    if (!list) byMessage.set(e.message_id, (list = []));
    list.push(e);
  }
  const eventsOf = (id: string): readonly EventRow[] => byMessage.get(id) ?? [];
  return {
    trace_id: traceId,
    messages: rows.map((r) => {
      const timeline = eventsOf(r.message_id);
      return {
        ...messageJson(r),
        correlation_id: r.correlation_id ?? null,
        reply_to: r.reply_to ?? null,
        events: timeline.map(eventJson),
        stages: stagesOf(r.created_at, timeline),
        elapsed_ms: elapsedMs(r.created_at, timeline),
      };
    }),
    tree: traceTree(rows, eventsOf),
  };
}
