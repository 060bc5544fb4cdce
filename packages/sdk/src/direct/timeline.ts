import { errorInfo, isKnownCode } from '@reach/core';
import type { MessageState } from '@reach/envelope';

/** One entry of a message's timeline: the fields of `GET /v1/messages/{id}/events`. */
export interface TimelineEntry {
  state: MessageState;
  /** RFC 3339. */
  at: string;
  attempt: number;
  /** The stage that reported it, named as the service that does it in queued mode. */
  service: string;
  instance: string;
  agent_id: string | null;
  code: number | null;
  reason: string | null;
  detail: unknown;
}

/** A message's row: the fields of `GET /v1/messages/{id}`. */
export interface MessageRow {
  message_id: string;
  status: MessageState;
  attempt: number;
  agent_id: string | null;
  code: number | null;
  name: string | null;
  reason: string | null;
  updated_at: string;
  parent_message_id: string | null;
  /** The handler's `{status, payload}` once a result came. */
  result?: unknown;
  /** A waited-for publish: its copies (message and agent ids) and how many. */
  copies?: unknown[];
  copies_total?: number;
}

const TERMINAL: ReadonlySet<MessageState> = new Set(['DELIVERED', 'REJECTED', 'DEAD']);
const RANK: Record<MessageState, number> = { PENDING: 0, ROUTED: 1, DELIVERING: 2, DELIVERED: 3, REJECTED: 3, DEAD: 3 };

export function isTerminal(state: MessageState): boolean {
  return TERMINAL.has(state);
}

/**
 * The message read model of direct mode, what the tracker folds from status events in queued
 * mode: every event per message, in order, and a row whose state only moves forward — a later
 * attempt wins, within an attempt a later stage, and a terminal state stays (docs/pipeline.md).
 */
export class Timeline {
  private readonly events = new Map<string, TimelineEntry[]>();
  private readonly rows = new Map<string, MessageRow>();
  private readonly watchers = new Set<{ messageId: string; check: () => boolean }>();

  record(messageId: string, e: Omit<TimelineEntry, 'instance'> & { parent?: string | null; result?: unknown }): void {
    const { parent, result, ...fields } = e;
    const event: TimelineEntry = { ...fields, instance: 'local' };
    let list = this.events.get(messageId);
    if (!list) this.events.set(messageId, (list = []));
    list.push(event);
    const row = this.rows.get(messageId);
    if (row === undefined || this.moves(row, event)) {
      this.rows.set(messageId, {
        message_id: messageId,
        status: event.state,
        attempt: event.attempt,
        agent_id: event.agent_id ?? row?.agent_id ?? null,
        code: event.code,
        name: event.code !== null && isKnownCode(event.code) ? errorInfo(event.code).name : null,
        reason: event.reason,
        updated_at: event.at,
        parent_message_id: parent ?? row?.parent_message_id ?? null,
        ...(result !== undefined ? { result } : row?.result !== undefined ? { result: row.result } : {}),
      });
    }
    for (const w of [...this.watchers]) if (w.messageId === messageId && w.check()) this.watchers.delete(w);
  }

  eventsOf(messageId: string): TimelineEntry[] {
    return [...(this.events.get(messageId) ?? [])];
  }

  statusOf(messageId: string): MessageRow | undefined {
    const row = this.rows.get(messageId);
    return row ? { ...row } : undefined;
  }

  /** Resolves with the row once `done(row)` holds (checked at each event of the message). */
  until(messageId: string, done: (row: MessageRow) => boolean, signal?: AbortSignal): Promise<MessageRow> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        const row = this.rows.get(messageId);
        if (!row || !done(row)) return false;
        resolve({ ...row });
        return true;
      };
      if (check()) return;
      const watcher = { messageId, check };
      this.watchers.add(watcher);
      signal?.addEventListener('abort', () => {
        this.watchers.delete(watcher);
        reject(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason)));
      });
    });
  }

  private moves(row: MessageRow, e: TimelineEntry): boolean {
    if (isTerminal(row.status)) return false;
    if (e.attempt !== row.attempt) return e.attempt > row.attempt;
    return RANK[e.state] >= RANK[row.status];
  }
}
