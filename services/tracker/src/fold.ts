import { messageIdTime, ERROR } from '@reach/core';
import type { StatusEvent } from '@reach/envelope';
import { resultForJsonb, type MessageColumns } from '@reach/store';

/**
 * Pure folding of a batch of status events into the rows the tracker writes: one upsert row per
 * message (its most advanced state in the batch, with its events as timeline entries). The database
 * applies the same "only forward" rule against what it already holds (see writer.ts), so the
 * outcome does not depend on how events were split into batches or in what order they came.
 */

/** Lifecycle rank, as the generated column messages.state_rank computes it. */
export function stateRank(state: string): number {
  switch (state) {
    case 'PENDING':
      return 0;
    case 'ROUTED':
      return 1;
    case 'DELIVERING':
      return 2;
    default:
      return 3;
  }
}

/** The code of a message its sender canceled (A2A CancelTask, docs/a2a.md): it ends DEAD with it. */
export const CANCELED_CODE = ERROR.CANCELED;

/** DEAD 3007: the sender canceled the message before any agent acked it. */
export function isCanceled(e: { state: string; code?: number | null }): boolean {
  return e.state === 'DEAD' && e.code === ERROR.CANCELED;
}

/**
 * (attempt, rank) ordering: a retry (higher attempt) beats any state of an earlier attempt —
 * except around a cancel. A cancel ends the message for good: nothing moves a canceled message
 * on, and a cancel beats every state that is not terminal, of any attempt. The cancel is stamped
 * with the attempt the read model showed, so a retry already under way when it came (its
 * PENDING or ROUTED of the next attempt produced before the dispatcher saw the cancel mark)
 * would otherwise bring the canceled task back to WORKING (writer.ts ADVANCES: the same rule).
 */
export function isAhead(a: { attempt: number; state: string; code?: number | null }, b: { attempt: number; state: string; code?: number | null }): boolean {
  if (isCanceled(b)) return false;
  if (isCanceled(a) && stateRank(b.state) < 3) return true;
  return a.attempt !== b.attempt ? a.attempt > b.attempt : stateRank(a.state) > stateRank(b.state);
}

/**
 * A later PENDING of the same attempt (the router's parked or held status after ingress's)
 * says why the message waits: it replaces the earlier one's code and reason (writer.ts REFINES).
 */
export function isRefinement(a: { attempt: number; state: string; at: number }, b: { attempt: number; state: string; at: number }): boolean {
  return a.attempt === b.attempt && a.state === 'PENDING' && b.state === 'PENDING' && a.at >= b.at;
}

/** A messages row as the tracker writes it (epoch ms; result as JSON text). */
export interface MessageUpsert extends Omit<MessageColumns<number>, 'result'> {
  /** JSON text of the handler's result, when an event of the batch carried one. */
  result: string | null;
  /** JSON text: the batch's events of this message as timeline entries (timelineEntry). */
  timeline: string;
}

export interface EventInsert {
  event_id: string;
  message_id: string;
  created_at: number;
  at: number;
  state: string;
  attempt: number;
  service: string;
  instance: string | null;
  agent_id: string | null;
  code: number | null;
  reason: string | null;
  /** JSON text. */
  detail: string | null;
}

export interface FoldedBatch {
  messages: MessageUpsert[];
  /** Every event of the batch once, as its timeline entry says it (each message's `timeline`). */
  events: EventInsert[];
}

/**
 * One entry of `messages.timeline`, as JSON text: a positional array in the order of the view
 * message_timeline's columns (migration 012). Built as text: the detail is already JSON.
 */
export function timelineEntry(e: EventInsert): string {
  const str = (v: string | null) => (v === null ? 'null' : JSON.stringify(v));
  return `[${str(e.event_id)},${e.at},${str(e.state)},${e.attempt},${str(e.service)},${str(e.instance)},${str(e.agent_id)},${e.code ?? 'null'},${str(e.reason)},${e.detail ?? 'null'}]`;
}

/** Why an event cannot be stored at all (it goes to the DLQ instead of blocking the partition). */
export function unusable(e: StatusEvent): string | undefined {
  if (e.message_id.length === 0 || e.message_id.length > MAX_ID) return `message_id must be 1–${MAX_ID} characters`;
  if (e.event_id.length === 0 || e.event_id.length > MAX_ID) return `event_id must be 1–${MAX_ID} characters`;
  return undefined;
}

// Ids and indexed text stay far below PostgreSQL's btree row limit (~2.7 kB); free text is
// bounded so one odd event cannot bloat the read model.
const MAX_ID = 256;
const MAX_INDEXED = 512;
const MAX_TEXT = 4000;
// timestamptz and JS dates both hold this range comfortably.
const MIN_TIME = Date.UTC(1970, 0, 1);
const MAX_TIME = Date.UTC(9999, 0, 1);
const PRIORITIES = new Set(['HIGH', 'NORMAL', 'LOW']);

/** PostgreSQL text cannot hold NUL characters. */
function text(v: string, max: number): string {
  const clean = v.includes('\0') ? v.replace(/\0/g, '') : v;
  return clean.length > max ? clean.slice(0, max) : clean;
}

function optText(v: string | null | undefined, max: number): string | null {
  return v === null || v === undefined ? null : text(v, max);
}

function time(v: number | null | undefined): number | undefined {
  return v !== null && v !== undefined && Number.isFinite(v) && v >= MIN_TIME && v <= MAX_TIME ? v : undefined;
}

function int32(v: number | null | undefined): number | null {
  return v !== null && v !== undefined && Number.isInteger(v) && v >= -2147483648 && v <= 2147483647 ? v : null;
}

/** Drops NUL characters (jsonb refuses \u0000) from every string and key of a parsed value. */
function scrub(v: unknown): unknown {
  if (typeof v === 'string') return v.includes('\0') ? v.replace(/\0/g, '') : v;
  if (Array.isArray(v)) return v.map(scrub);
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, val] of Object.entries(v)) out[k.replace(/\0/g, '')] = scrub(val);
    return out;
  }
  return v;
}

/** detail_json parsed for jsonb; text that is not JSON is kept as `{raw}` rather than lost. */
export function parseDetail(detailJson: string | null): unknown {
  return detailOf(detailJson).value;
}

/** A detail as the fold uses it: the parsed value (result, rule) and the JSON text to store. */
interface Detail {
  readonly value: unknown;
  readonly json: string | null;
  /** As parsed, NULs kept: the result is stored from it, losslessly (resultForJsonb). */
  readonly unscrubbed: unknown;
}

/**
 * Parses detail_json once. Valid JSON can only hold a NUL as the escape `\u0000` (a raw one
 * fails to parse), so text without that escape is stored as it came: no scrub, no second
 * JSON.stringify (those two were ~10 % of the tracker's CPU under load).
 */
export function detailOf(detailJson: string | null): Detail {
  if (detailJson === null) return { value: null, json: null, unscrubbed: null };
  let parsed: unknown;
  try {
    parsed = JSON.parse(detailJson);
  } catch {
    const raw = { raw: text(detailJson, MAX_TEXT) };
    return { value: raw, json: JSON.stringify(raw), unscrubbed: raw };
  }
  if (!detailJson.includes('\\u0000')) return { value: parsed, json: parsed === null ? null : detailJson, unscrubbed: parsed };
  // The timeline's copy loses its NULs; the result column keeps them (resultOf).
  const clean = scrub(parsed);
  return { value: clean, json: clean === null ? null : JSON.stringify(clean), unscrubbed: parsed };
}

function resultOf(detail: unknown): string | null {
  if (detail === null || typeof detail !== 'object' || Array.isArray(detail)) return null;
  const r = (detail as { result?: unknown }).result;
  return r === undefined || r === null ? null : resultForJsonb(JSON.stringify(r));
}

function ruleOf(detail: unknown): string | null {
  if (detail === null || typeof detail !== 'object' || Array.isArray(detail)) return null;
  const r = (detail as { rule?: unknown }).rule;
  return typeof r === 'string' ? text(r, MAX_INDEXED) : null;
}

/**
 * The messages' created_at (the partition key of both tables, so a message and its timeline
 * share a month): from the events, else what the read model already has (`known`), else the
 * time in the ULID of the message id, else the earliest event time.
 */
function createdAt(events: readonly StatusEvent[], known: ReadonlyMap<string, number>): number {
  for (const e of events) {
    const t = time(e.created_at);
    if (t !== undefined) return t;
  }
  const first = events[0]!;
  return known.get(first.message_id) ?? time(messageIdTime(first.message_id)) ?? Math.min(...events.map((e) => time(e.at) ?? Date.now()));
}

/** Message ids of the batch none of whose events carry created_at: the writer looks them up. */
export function idsWithoutCreatedAt(events: readonly StatusEvent[]): string[] {
  const have = new Set<string>();
  const all = new Set<string>();
  for (const e of events) {
    all.add(e.message_id);
    if (time(e.created_at) !== undefined) have.add(e.message_id);
  }
  return [...all].filter((id) => !have.has(id));
}

function firstOf<I, T>(items: readonly I[], pick: (item: I) => T | null | undefined): T | null {
  for (const item of items) {
    const v = pick(item);
    if (v !== null && v !== undefined) return v;
  }
  return null;
}

/** The events from most to least advanced; equal ones keep their arrival order. */
function byProgress(list: readonly StatusEvent[]): StatusEvent[] {
  return [...list].sort((a, b) => Math.max(0, b.attempt) - Math.max(0, a.attempt) || stateRank(b.state) - stateRank(a.state));
}

export function foldBatch(batch: readonly StatusEvent[], known: ReadonlyMap<string, number> = new Map()): FoldedBatch {
  const byMessage = new Map<string, StatusEvent[]>();
  for (const e of batch) {
    let list = byMessage.get(e.message_id);
    if (!list) byMessage.set(e.message_id, (list = []));
    list.push(e);
  }
  const messages: MessageUpsert[] = [];
  const events = new Map<string, EventInsert>();
  // Sorted by id: concurrent batches lock rows in one order.
  for (const id of [...byMessage.keys()].sort()) {
    const list = byMessage.get(id)!;
    const created = createdAt(list, known);
    // The first event that reaches the most advanced (attempt, state) wins, as in the database.
    let winner = list[0]!;
    const rankOf = (e: StatusEvent) => ({ attempt: Math.max(0, e.attempt), state: e.state, code: e.code, at: time(e.at) ?? 0 });
    for (const e of list) if (isAhead(rankOf(e), rankOf(winner)) || (e !== winner && isRefinement(rankOf(e), rankOf(winner)))) winner = e;
    const parsed = list.map((e) => detailOf(e.detail_json));
    const details = parsed.map((d) => d.value);
    // Metadata from the winner when it has it, else from any event of the message.
    const ordered = [winner, ...list.filter((e) => e !== winner)];
    const meta = <T>(pick: (e: StatusEvent) => T | null | undefined): T | null => firstOf(ordered, pick);
    const priority = meta((e) => e.priority);
    const entries: string[] = [];
    list.forEach((e, i) => {
      if (events.has(e.event_id)) return;
      const event: EventInsert = {
        event_id: text(e.event_id, MAX_ID),
        message_id: text(id, MAX_ID),
        created_at: created,
        at: time(e.at) ?? Date.now(),
        state: e.state,
        attempt: Math.max(0, e.attempt),
        service: text(e.service, MAX_INDEXED),
        instance: optText(e.instance, MAX_INDEXED),
        agent_id: optText(e.agent_id, MAX_INDEXED),
        code: int32(e.code),
        reason: optText(e.reason, MAX_TEXT),
        detail: parsed[i]!.json,
      };
      events.set(e.event_id, event);
      entries.push(timelineEntry(event));
    });
    messages.push({
      message_id: text(id, MAX_ID),
      created_at: created,
      updated_at: time(winner.at) ?? Date.now(),
      status: winner.state,
      attempt: Math.max(0, winner.attempt),
      message_type: text(meta((e) => e.message_type) ?? '', MAX_INDEXED),
      producer: text(meta((e) => e.producer) ?? '', MAX_INDEXED),
      capability: optText(
        meta((e) => e.capability),
        MAX_INDEXED,
      ),
      topic: optText(
        meta((e) => e.topic),
        MAX_INDEXED,
      ),
      target_agent_id: optText(
        meta((e) => e.target_agent_id),
        MAX_INDEXED,
      ),
      agent_id: optText(winner.agent_id, MAX_INDEXED),
      parent_message_id: optText(
        meta((e) => e.parent_message_id),
        MAX_ID,
      ),
      trace_id: text(meta((e) => e.trace_id) ?? '', MAX_INDEXED),
      request_id: optText(
        meta((e) => e.request_id),
        MAX_INDEXED,
      ),
      session_id: optText(
        meta((e) => e.session_id),
        MAX_INDEXED,
      ),
      correlation_id: optText(
        meta((e) => e.correlation_id),
        MAX_INDEXED,
      ),
      reply_to: optText(
        meta((e) => e.reply_to),
        MAX_INDEXED,
      ),
      idempotency_key: optText(
        meta((e) => e.idempotency_key),
        MAX_INDEXED,
      ),
      priority: priority !== null && PRIORITIES.has(priority) ? priority : 'NORMAL',
      expire_at: time(meta((e) => e.expire_at)) ?? null,
      code: int32(winner.code),
      reason: optText(winner.reason, MAX_TEXT),
      result: firstOf(
        parsed.map((d) => d.unscrubbed),
        resultOf,
      ),
      // The routing rule of the most advanced step that names one (ROUTED, usually).
      rule: firstOf(byProgress(list), (e) => ruleOf(details[list.indexOf(e)])),
      timeline: `[${entries.join(',')}]`,
    });
  }
  return { messages, events: [...events.values()] };
}
