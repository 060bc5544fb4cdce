/**
 * A message's (or a whole trace's) timeline as a waterfall: one row per state event on a shared
 * time axis, each bar running until the next event of the same message, grouped into attempts.
 * Pure layout (unit-tested); views/lookup.ts draws it.
 */

/** One entry of GET /v1/messages/{id}/events (docs/design.md §3). */
export interface TimelineEvent {
  state: string;
  at: string;
  attempt: number;
  service: string;
  instance?: string | null;
  agent_id: string | null;
  code: number | null;
  reason: string | null;
  detail: unknown;
}

export interface MessageTimeline {
  message_id: string;
  parent_message_id?: string | null;
  events: readonly TimelineEvent[];
}

export const TERMINAL_STATES: readonly string[] = ['DELIVERED', 'REJECTED', 'DEAD'];

/** The order of states within one attempt, to break ties between events stamped the same millisecond. */
const STATE_RANK: Record<string, number> = { PENDING: 0, ROUTED: 1, DELIVERING: 2, DELIVERED: 3, REJECTED: 3, DEAD: 3 };

export interface WaterfallRow {
  message_id: string;
  /** Nesting depth: a fan-out copy sits under its parent. */
  depth: number;
  attempt: number;
  state: string;
  service: string;
  agent_id: string | null;
  code: number | null;
  reason: string | null;
  detail: unknown;
  /** epoch ms of the event */
  at: number;
  /** ms since the first event on the axis */
  offsetMs: number;
  /** ms until this message's next event; for its last event 0 when terminal, else until now (still open). */
  durationMs: number;
  open: boolean;
  terminal: boolean;
  /** Bar position on the axis in percent. */
  leftPct: number;
  widthPct: number;
}

export interface AttemptSummary {
  message_id: string;
  attempt: number;
  startMs: number;
  endMs: number;
  durationMs: number;
  /** The last state reached in this attempt. */
  outcome: string;
  agent_id: string | null;
  code: number | null;
}

export interface Tick {
  ms: number;
  pct: number;
}

export interface WaterfallLayout {
  startMs: number;
  endMs: number;
  totalMs: number;
  rows: WaterfallRow[];
  attempts: AttemptSummary[];
  ticks: Tick[];
}

function sortEvents(events: readonly TimelineEvent[]): TimelineEvent[] {
  return [...events].sort((a, b) => Date.parse(a.at) - Date.parse(b.at) || a.attempt - b.attempt || (STATE_RANK[a.state] ?? 9) - (STATE_RANK[b.state] ?? 9));
}

/** Fan-out copies under their parent, in the order they appear; unknown parents at the top level. */
function orderMessages(messages: readonly MessageTimeline[]): Array<{ m: MessageTimeline; depth: number }> {
  const ids = new Set(messages.map((m) => m.message_id));
  const children = new Map<string, MessageTimeline[]>();
  const roots: MessageTimeline[] = [];
  for (const m of messages) {
    const parent = m.parent_message_id;
    if (parent && ids.has(parent) && parent !== m.message_id) {
      let list = children.get(parent);
      if (!list) children.set(parent, (list = []));
      list.push(m);
    } else roots.push(m);
  }
  const out: Array<{ m: MessageTimeline; depth: number }> = [];
  const seen = new Set<string>();
  const visit = (m: MessageTimeline, depth: number) => {
    if (seen.has(m.message_id)) return;
    seen.add(m.message_id);
    out.push({ m, depth });
    for (const c of children.get(m.message_id) ?? []) visit(c, depth + 1);
  };
  const firstAt = (m: MessageTimeline) => Math.min(...m.events.map((e) => Date.parse(e.at)), Infinity);
  for (const r of [...roots].sort((a, b) => firstAt(a) - firstAt(b))) visit(r, 0);
  return out;
}

/** A tick step of 1, 2 or 5 × 10^k giving about `target` ticks over `totalMs`. */
export function tickStep(totalMs: number, target = 5): number {
  const raw = Math.max(totalMs, 1) / target;
  const pow = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * pow >= raw) return m * pow;
  return 10 * pow;
}

export function layoutWaterfall(messages: readonly MessageTimeline[], nowMs: number): WaterfallLayout {
  const ordered = orderMessages(messages.filter((m) => m.events.length > 0));
  const draft: Array<Omit<WaterfallRow, 'offsetMs' | 'leftPct' | 'widthPct'>> = [];
  const attempts: AttemptSummary[] = [];
  for (const { m, depth } of ordered) {
    const events = sortEvents(m.events);
    events.forEach((e, i) => {
      const at = Date.parse(e.at);
      const next = events[i + 1];
      const terminal = TERMINAL_STATES.includes(e.state);
      const open = next === undefined && !terminal;
      const durationMs = next ? Math.max(0, Date.parse(next.at) - at) : open ? Math.max(0, nowMs - at) : 0;
      draft.push({
        message_id: m.message_id,
        depth,
        attempt: e.attempt,
        state: e.state,
        service: e.service,
        agent_id: e.agent_id,
        code: e.code,
        reason: e.reason,
        detail: e.detail,
        at,
        durationMs,
        open,
        terminal,
      });
    });
    for (const attempt of [...new Set(events.map((e) => e.attempt))]) {
      const rows = draft.filter((r) => r.message_id === m.message_id && r.attempt === attempt);
      const first = rows[0]!;
      const last = rows[rows.length - 1]!;
      const endMs = last.at + last.durationMs;
      attempts.push({
        message_id: m.message_id,
        attempt,
        startMs: first.at,
        endMs,
        durationMs: endMs - first.at,
        outcome: last.state,
        agent_id: [...rows].reverse().find((r) => r.agent_id)?.agent_id ?? null,
        code: [...rows].reverse().find((r) => r.code !== null)?.code ?? null,
      });
    }
  }
  if (draft.length === 0) return { startMs: nowMs, endMs: nowMs, totalMs: 0, rows: [], attempts: [], ticks: [] };
  const startMs = Math.min(...draft.map((r) => r.at));
  const endMs = Math.max(...draft.map((r) => r.at + r.durationMs));
  const totalMs = endMs - startMs;
  const span = Math.max(totalMs, 1);
  const rows = draft.map((r) => ({ ...r, offsetMs: r.at - startMs, leftPct: ((r.at - startMs) / span) * 100, widthPct: (r.durationMs / span) * 100 }));
  const step = tickStep(totalMs);
  const ticks: Tick[] = [];
  for (let ms = 0; ms <= totalMs + 1e-9; ms += step) ticks.push({ ms, pct: (ms / span) * 100 });
  return { startMs, endMs, totalMs, rows, attempts, ticks };
}

/** The routing decision recorded on a ROUTED (or NO_ROUTE) event's detail, when it has one. */
export interface RoutingDecision {
  strategy: string;
  rule: string | null;
  chosen: string | null;
  candidates: Array<{ agent_id: string; score: number; load_rate?: number; health?: number; priority?: number; locality?: number; saturated?: boolean }>;
  candidatesTotal: number;
  /** Everything else the router recorded (sticky, preferred, rejected, why, saturation, ...). */
  extra: Record<string, unknown>;
}

export function routingDecision(detail: unknown): RoutingDecision | undefined {
  if (typeof detail !== 'object' || detail === null) return undefined;
  const d = detail as Record<string, unknown>;
  if (typeof d.strategy !== 'string') return undefined;
  const raw = Array.isArray(d.candidates) ? (d.candidates as unknown[]) : [];
  const candidates = raw
    .filter(
      (c): c is RoutingDecision['candidates'][number] => typeof c === 'object' && c !== null && typeof (c as { agent_id?: unknown }).agent_id === 'string',
    )
    .map((c) => ({ ...c, score: typeof c.score === 'number' ? c.score : 0 }))
    .sort((a, b) => b.score - a.score);
  const { strategy, rule, chosen, candidates: _c, candidates_total, ...extra } = d;
  return {
    strategy,
    rule: typeof rule === 'string' ? rule : null,
    chosen: typeof chosen === 'string' ? chosen : null,
    candidates,
    candidatesTotal: typeof candidates_total === 'number' ? candidates_total : candidates.length,
    extra,
  };
}
