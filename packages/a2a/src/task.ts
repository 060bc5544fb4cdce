import { isReachTerminal, resultStatus, taskStateOf } from './state.js';
import type { Artifact, Message, Part, StreamResponse, Task, TaskStatus } from './wire.js';

/**
 * An A2A Task is an Agent-Reach message and its timeline (docs/a2a.md): task id = message id,
 * context id = session id, the status from taskStateOf, the handler's result as the one
 * artifact, and every timeline entry as a status update whose SSE id is its position.
 */

/** What the bridge reads of a message in the read model. */
export interface TaskRow {
  readonly message_id: string;
  readonly status: string;
  readonly attempt: number;
  readonly agent_id: string | null;
  readonly code: number | null;
  readonly reason: string | null;
  readonly updated_at: Date;
  readonly session_id: string | null;
  readonly capability: string | null;
  readonly result: unknown;
}

/** One entry of a message's timeline (the view message_timeline), in timeline order. */
export interface TimelineEntry {
  readonly state: string;
  readonly at: Date;
  readonly attempt: number;
  readonly service: string;
  readonly agent_id: string | null;
  readonly code: number | null;
  readonly reason: string | null;
}

/** The artifact id of a handler's result (a message has at most one result). */
export const RESULT_ARTIFACT_ID = 'result';

export function contextIdOf(row: Pick<TaskRow, 'session_id' | 'message_id'>): string {
  return row.session_id ?? row.message_id;
}

/** A handler's result as an artifact part: JSON as a data part, a string as text, bytes as raw. */
export function resultParts(result: unknown): Part[] {
  const r = (result ?? {}) as { payload?: unknown; payload_b64?: unknown };
  if (typeof r.payload_b64 === 'string') return [{ raw: r.payload_b64 }];
  if (typeof r.payload === 'string') return [{ text: r.payload }];
  return [{ data: r.payload ?? null }];
}

export function resultArtifact(result: unknown): Artifact {
  return { artifactId: RESULT_ARTIFACT_ID, name: 'result', parts: resultParts(result) };
}

/** Agent-Reach's own view of a state, carried in the A2A objects' metadata under `reach`. */
function reachMetadata(
  e: { state: string; attempt: number; agent_id: string | null; code: number | null; reason: string | null },
  extra: Record<string, unknown> = {},
) {
  return { reach: { state: e.state, attempt: e.attempt, agent_id: e.agent_id, code: e.code, reason: e.reason, ...extra } };
}

/** The agent's words on a failure: our code and reason as a status message. */
function failureMessage(taskId: string, contextId: string, code: number | null, reason: string | null, result: unknown): Message | undefined {
  const errorPayload = resultStatus(result) === 'error' ? resultParts(result) : [];
  if (code === null && reason === null && errorPayload.length === 0) return undefined;
  const text = [code !== null ? String(code) : undefined, reason ?? undefined].filter((s) => s !== undefined).join(' ');
  return {
    messageId: `${taskId}:status`,
    taskId,
    contextId,
    role: 'ROLE_AGENT',
    parts: [...(text ? [{ text }] : []), ...errorPayload],
    metadata: { reach: { code, reason } },
  };
}

function statusOf(row: TaskRow, at: Date): TaskStatus {
  const state = taskStateOf(row);
  const contextId = contextIdOf(row);
  const failed = state === 'TASK_STATE_FAILED' || state === 'TASK_STATE_REJECTED' || state === 'TASK_STATE_CANCELED';
  const message = failed ? failureMessage(row.message_id, contextId, row.code, row.reason, row.result) : undefined;
  return { state, timestamp: at.toISOString(), ...(message ? { message } : {}) };
}

/** Whether the result belongs in the task as an artifact (a delivered message with a result). */
function hasResultArtifact(row: Pick<TaskRow, 'status' | 'result'>): boolean {
  return row.status === 'DELIVERED' && row.result !== null && row.result !== undefined;
}

/**
 * The task as it stands. `timeline` gives the position (how many timeline entries it reflects:
 * the SSE id of a stream's first event); history holds the message that started it when given.
 */
export function taskOf(row: TaskRow, opts: { timelineLength: number; history?: Message[]; includeArtifacts?: boolean }): Task {
  const contextId = contextIdOf(row);
  const task: Task = {
    id: row.message_id,
    contextId,
    status: statusOf(row, row.updated_at),
    metadata: reachMetadata(
      { state: row.status, attempt: row.attempt, agent_id: row.agent_id, code: row.code, reason: row.reason },
      {
        message_id: row.message_id,
        capability: row.capability,
        position: opts.timelineLength,
      },
    ),
  };
  if (opts.includeArtifacts !== false) task.artifacts = hasResultArtifact(row) ? [resultArtifact(row.result)] : [];
  if (opts.history && opts.history.length > 0) task.history = opts.history;
  return task;
}

/**
 * How long a timeline entry waits before a stream sends it. Services stamp their events and the
 * tracker writes them in batches, so an event can land a few hundred ms after a later-stamped
 * one (ingress's PENDING after the router's ROUTED) and slot in before it. An entry is sent
 * only once everything up to it is older than this window, so its position (its SSE id) never
 * moves afterwards and a resume from it misses nothing.
 */
export const SETTLE_MS = 1_000;

/** How many leading entries of the timeline are settled at `now` (see SETTLE_MS). */
export function settledLength(timeline: readonly TimelineEntry[], now: number, settleMs = SETTLE_MS): number {
  let n = 0;
  while (n < timeline.length && timeline[n]!.at.getTime() <= now - settleMs) n++;
  return n;
}

/** One event of a task's stream with its SSE id. */
export interface StreamEvent {
  readonly id: string;
  readonly event: StreamResponse;
  /** The task is over after this event: the stream closes. */
  readonly final: boolean;
}

/**
 * Where a client resumes: the SSE id of the last event it saw (`Last-Event-ID`). Ids are the
 * timeline position `N` of a status update, or `N.result` for the result artifact sent just
 * before the status update of position N. Anything else resumes from the start.
 */
export interface ResumePoint {
  readonly position: number;
  /** The result artifact of `position + 1` was already seen. */
  readonly sawArtifactOfNext: boolean;
}

export function parseEventId(id: string | undefined): ResumePoint {
  const m = id === undefined ? null : /^(\d{1,9})(\.result)?$/.exec(id.trim());
  if (!m) return { position: 0, sawArtifactOfNext: false };
  const n = Number(m[1]);
  return m[2] ? { position: n - 1, sawArtifactOfNext: true } : { position: n, sawArtifactOfNext: false };
}

/**
 * The stream events of timeline entries after `from` (positions are 1-based): a status update
 * per entry, and before the terminal DELIVERED one the result artifact. `row` supplies what the
 * timeline entries do not hold (the session, the result). The terminal event is final.
 */
export function timelineEvents(row: TaskRow, timeline: readonly TimelineEntry[], from: ResumePoint): StreamEvent[] {
  const out: StreamEvent[] = [];
  const taskId = row.message_id;
  const contextId = contextIdOf(row);
  for (let i = from.position; i < timeline.length; i++) {
    const e = timeline[i]!;
    const position = i + 1;
    const terminal = isReachTerminal(e.state);
    // The row's result and code describe the terminal entry (the first terminal one wins, as in the read model).
    const view: TaskRow = terminal
      ? { ...row, status: e.state, attempt: e.attempt, code: e.code ?? row.code, reason: e.reason ?? row.reason }
      : { ...row, status: e.state, attempt: e.attempt, code: e.code, reason: e.reason, result: null };
    const skipArtifact = i === from.position && from.sawArtifactOfNext;
    if (terminal && hasResultArtifact(view) && !skipArtifact) {
      out.push({
        id: `${position}.result`,
        event: { artifactUpdate: { taskId, contextId, artifact: resultArtifact(view.result), lastChunk: true } },
        final: false,
      });
    }
    out.push({
      id: String(position),
      event: {
        statusUpdate: {
          taskId,
          contextId,
          status: statusOf(view, e.at),
          metadata: reachMetadata(e, { service: e.service, position }),
        },
      },
      final: terminal,
    });
    if (terminal) break;
  }
  return out;
}
