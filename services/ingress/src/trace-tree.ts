import { ERROR } from '@reach/core';
/**
 * The shape of a trace (R-F1, `GET /v1/traces/{trace_id}`), computed from the read model
 * alone: which message caused which, and how long each stage of each message took. Pure.
 *
 * Links, in order of certainty:
 *   fanout         a topic copy → the message it was copied from (parent_message_id)
 *   reply          a correlated reply or receipt → the message it answers (correlation_id)
 *   sent_by_handler a message an agent produced while handling a delivery of the same trace:
 *                  the latest message delivered to that agent before this one was created
 *                  (inferred: nothing in a message records which delivery its handler ran)
 * Retries are not messages: they are the attempts of a message's stages.
 */
export interface TraceMessage {
  readonly message_id: string;
  readonly created_at: Date;
  readonly producer: string;
  readonly agent_id: string | null;
  readonly parent_message_id: string | null;
  readonly correlation_id?: string | null | undefined;
}

export interface TraceEvent {
  readonly state: string;
  readonly at: Date;
  readonly attempt: number;
  readonly service: string;
  readonly code: number | null;
  readonly detail: unknown;
}

export interface Stage {
  /** ingest, route, held, parked, dispatch, lane_wait, agent, result, retry_wait, or `<from>_to_<to>`. */
  readonly stage: string;
  readonly attempt: number;
  readonly from: string;
  readonly to: string;
  readonly started_at: string;
  readonly ended_at: string;
  readonly duration_ms: number;
  /** The service that reported the end of the stage. */
  readonly service: string;
}

export type Link = 'root' | 'fanout' | 'reply' | 'sent_by_handler';

export interface TreeNode {
  readonly message_id: string;
  readonly link: Link;
  readonly children: TreeNode[];
}

function isWaiting(e: TraceEvent): boolean {
  return e.state === 'DELIVERING' && typeof e.detail === 'object' && e.detail !== null && 'waiting' in e.detail;
}

/** The name of the stage between two consecutive events of a message; undefined for a repeat (an at-least-once duplicate). */
export function stageName(a: TraceEvent, b: TraceEvent): string | undefined {
  switch (a.state) {
    case 'PENDING':
      if (b.state === 'PENDING' && a.attempt === b.attempt && a.service === b.service && a.code === b.code) return undefined;
      // The router held the message (saturated, 2002) or parked it (no route yet, 2001).
      if (a.service === 'router' && a.code === ERROR.SATURATED) return 'held';
      if (a.service === 'router' && a.code === ERROR.NO_ROUTE) return 'parked';
      // A failed attempt waits on reach.retry.v1 until the retry-scheduler re-publishes it.
      if (b.service === 'retry-scheduler' || (b.state === 'PENDING' && b.service !== 'router')) return 'retry_wait';
      return 'route';
    case 'ROUTED':
      if (b.state === 'ROUTED') return undefined;
      return b.state === 'DELIVERING' ? 'dispatch' : `routed_to_${b.state.toLowerCase()}`;
    case 'DELIVERING':
      if (b.state === 'DELIVERING') return isWaiting(a) && !isWaiting(b) ? 'lane_wait' : undefined;
      return 'agent';
    case 'DELIVERED':
      return b.state === 'DELIVERED' ? 'result' : `delivered_to_${b.state.toLowerCase()}`;
    default:
      return a.state === b.state ? undefined : `${a.state.toLowerCase()}_to_${b.state.toLowerCase()}`;
  }
}

/** A stage belongs to the attempt it started in (a failed attempt's agent time is that attempt's). */
function stage(name: string, a: { state: string; at: Date; attempt: number }, b: TraceEvent): Stage {
  return {
    stage: name,
    attempt: a.attempt,
    from: a.state,
    to: b.state,
    started_at: a.at.toISOString(),
    ended_at: b.at.toISOString(),
    duration_ms: Math.max(0, b.at.getTime() - a.at.getTime()),
    service: b.service,
  };
}

/**
 * The stages of one message from its timeline (events in timeline order): from its creation
 * to the first PENDING (`ingest`), then from each event to the next one that moves it on.
 */
export function stagesOf(createdAt: Date, events: readonly TraceEvent[]): Stage[] {
  const out: Stage[] = [];
  const first = events[0];
  if (first?.state === 'PENDING' && first.attempt === 0 && first.at.getTime() >= createdAt.getTime()) {
    out.push(stage('ingest', { state: 'CREATED', at: createdAt, attempt: 0 }, first));
  }
  // A repeated event (a hold reported again, an at-least-once duplicate) does not start a new
  // stage: the stage runs from the first of the repeats.
  let start = first;
  for (const b of events.slice(1)) {
    const name = stageName(start!, b);
    if (name === undefined) continue;
    out.push(stage(name, start!, b));
    start = b;
  }
  return out;
}

/** From the message's creation (or its first event) to its last event, in ms; null without events. */
export function elapsedMs(createdAt: Date, events: readonly TraceEvent[]): number | null {
  const first = events[0];
  const last = events[events.length - 1];
  if (!first || !last) return null;
  const start = first.state === 'PENDING' ? Math.min(createdAt.getTime(), first.at.getTime()) : first.at.getTime();
  return Math.max(0, last.at.getTime() - start);
}

/** When the message was first handed to its agent (its first DELIVERING with a seq, else any). */
function deliveredAt(events: readonly TraceEvent[]): number | undefined {
  const delivering = events.filter((e) => e.state === 'DELIVERING');
  return (delivering.find((e) => !isWaiting(e)) ?? delivering[0])?.at.getTime();
}

/** The parent of each message that has one in the trace, with how they are linked. */
export function parentsOf(
  messages: readonly TraceMessage[],
  eventsOf: (messageId: string) => readonly TraceEvent[],
): Map<string, { parent: string; link: Link }> {
  const ids = new Set(messages.map((m) => m.message_id));
  const delivered = messages
    .filter((m) => m.agent_id !== null)
    .map((m) => ({ id: m.message_id, agent: m.agent_id!, at: deliveredAt(eventsOf(m.message_id)) }))
    .filter((d): d is { id: string; agent: string; at: number } => d.at !== undefined);
  const out = new Map<string, { parent: string; link: Link }>();
  for (const m of messages) {
    if (m.parent_message_id && m.parent_message_id !== m.message_id && ids.has(m.parent_message_id)) {
      out.set(m.message_id, { parent: m.parent_message_id, link: 'fanout' });
      continue;
    }
    if (m.correlation_id && m.correlation_id !== m.message_id && ids.has(m.correlation_id)) {
      out.set(m.message_id, { parent: m.correlation_id, link: 'reply' });
      continue;
    }
    const created = m.created_at.getTime();
    let best: { id: string; at: number } | undefined;
    for (const d of delivered) {
      if (d.agent !== m.producer || d.id === m.message_id || d.at > created) continue;
      if (!best || d.at > best.at) best = d;
    }
    if (best) out.set(m.message_id, { parent: best.id, link: 'sent_by_handler' });
  }
  return out;
}

/**
 * The trace as a forest: roots are messages without a parent in the trace; children in the
 * order of `messages` (the read model gives them by creation). A link that would close a cycle
 * is dropped, so every message appears exactly once.
 */
export function traceTree(messages: readonly TraceMessage[], eventsOf: (messageId: string) => readonly TraceEvent[]): TreeNode[] {
  const parents = parentsOf(messages, eventsOf);
  const nodes = new Map<string, TreeNode>();
  for (const m of messages) {
    const p = parents.get(m.message_id);
    nodes.set(m.message_id, { message_id: m.message_id, link: p ? p.link : 'root', children: [] });
  }
  // Break cycles: a message whose way up leads back to itself becomes a root (the first one of
  // each cycle met, which breaks that cycle for the others).
  for (const m of messages) {
    const seen = new Set<string>();
    for (let cur = parents.get(m.message_id); cur && !seen.has(cur.parent); cur = parents.get(cur.parent)) {
      if (cur.parent === m.message_id) {
        parents.delete(m.message_id);
        nodes.set(m.message_id, { ...nodes.get(m.message_id)!, link: 'root' });
        break;
      }
      seen.add(cur.parent);
    }
  }
  const roots: TreeNode[] = [];
  for (const m of messages) {
    const node = nodes.get(m.message_id)!;
    const p = parents.get(m.message_id);
    if (p) nodes.get(p.parent)!.children.push(node);
    else roots.push(node);
  }
  return roots;
}
