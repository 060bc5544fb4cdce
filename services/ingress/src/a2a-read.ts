import type { TaskRow, TimelineEntry } from '@reach/a2a';
import { resultFromJsonb, type Pool, type QueryResultRow } from '@reach/store';
import { queryReadModel, type MessageRow } from './read-model.js';

/**
 * The read-model queries of the A2A bridge (docs/a2a.md): a task is a message row (with its
 * session, the A2A context) and its timeline. Read-only, like the rest of ingress's reads.
 */
export type A2aRow = MessageRow & TaskRow & { idempotency_key: string | null };

const COLUMNS = `message_id, status, attempt, agent_id, code, reason, updated_at, created_at, trace_id, producer,
  message_type, capability, topic, target_agent_id, parent_message_id, result, session_id, idempotency_key`;

const EVENT_ORDER = `at, attempt,
  CASE state WHEN 'PENDING' THEN 0 WHEN 'ROUTED' THEN 1 WHEN 'DELIVERING' THEN 2
             WHEN 'DELIVERED' THEN 3 WHEN 'REJECTED' THEN 3 WHEN 'DEAD' THEN 3 ELSE 1 END,
  event_id`;

/** ListTasks: at most this many tasks a page (spec: default 50, at most 100). */
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 100;

export interface TaskPageQuery {
  /** undefined: every producer's (the admin). */
  producer: string | undefined;
  sessionId?: string | undefined;
  /** Agent-Reach statuses to keep (a coarse filter; the caller refines by A2A state). */
  statuses?: readonly string[] | undefined;
  updatedAfter?: Date | undefined;
  /** Strictly after this position in (updated_at desc, message_id desc). */
  cursor?: { updatedAt: Date; messageId: string } | undefined;
  limit: number;
}

export class A2aReadModel {
  constructor(private readonly pg: Pool) {}

  private query<R extends QueryResultRow>(sql: string, params: unknown[]): Promise<R[]> {
    return queryReadModel<R>(this.pg, sql, params);
  }

  private async rows(sql: string, params: unknown[]): Promise<A2aRow[]> {
    const rows = await this.query<A2aRow>(sql, params);
    return rows.map((r) => (typeof r.result === 'string' ? { ...r, result: resultFromJsonb(r.result) } : r));
  }

  async task(messageId: string): Promise<A2aRow | undefined> {
    return (await this.rows(`SELECT ${COLUMNS} FROM messages WHERE message_id = $1 ORDER BY updated_at DESC LIMIT 1`, [messageId]))[0];
  }

  /** The timeline in timeline order (as GET /v1/messages/{id}/events), read on every poll of a stream. */
  async timeline(messageId: string): Promise<TimelineEntry[]> {
    return this.query<TimelineEntry & QueryResultRow>(
      `SELECT state, at, attempt, service, agent_id, code, reason FROM message_timeline WHERE message_id = $1 ORDER BY ${EVENT_ORDER}`,
      [messageId],
    );
  }

  /** A page of keyed messages, most recently updated first, and how many match in all. */
  async page(q: TaskPageQuery): Promise<{ rows: A2aRow[]; total: number }> {
    const where = ['idempotency_key IS NOT NULL'];
    const params: unknown[] = [];
    const add = (sql: (n: string) => string, value: unknown) => {
      params.push(value);
      where.push(sql(`$${params.length}`));
    };
    if (q.producer !== undefined) add((n) => `producer = ${n}`, q.producer);
    if (q.sessionId !== undefined) add((n) => `session_id = ${n}`, q.sessionId);
    if (q.statuses !== undefined) add((n) => `status = ANY(${n}::text[])`, q.statuses);
    if (q.updatedAfter !== undefined) add((n) => `updated_at >= ${n}`, q.updatedAfter);
    const filter = where.join(' AND ');
    const countParams = [...params];
    if (q.cursor) {
      params.push(q.cursor.updatedAt, q.cursor.messageId);
      where.push(`(updated_at, message_id) < ($${params.length - 1}, $${params.length})`);
    }
    params.push(q.limit);
    const [rows, count] = await Promise.all([
      this.rows(`SELECT ${COLUMNS} FROM messages WHERE ${where.join(' AND ')} ORDER BY updated_at DESC, message_id DESC LIMIT $${params.length}`, params),
      this.query<{ n: string }>(`SELECT count(*) AS n FROM messages WHERE ${filter}`, countParams),
    ]);
    return { rows, total: Number(count[0]?.n ?? 0) };
  }
}
