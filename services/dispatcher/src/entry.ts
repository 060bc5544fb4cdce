import { envelopeFromJson, envelopeToJson, type Envelope, type EnvelopeJson, type RoutedDelivery } from '@reach/envelope';
import { budgetStartOf } from '@reach/routing';
import { RECEIPT_MESSAGE_TYPE } from '@reach/service-kit';

/**
 * One delivery in an agent's replay buffer, stored as a single string of two lines:
 *
 *     {"mid":"msg_…","parent":null,"attempt":0,"ctx_ttl_s":300,"message":{…no payload…}}
 *     {"type":"deliver","seq":12,"attempt":0,"deadline":"…","message":{…}}
 *
 * The first line (the head) is the dispatcher's bookkeeping: the delivered message id (which
 * the ack script checks by prefix), the fan-out parent, and the envelope fields without the
 * payload — all a status event needs, and the context a later `result` needs (its reply_to,
 * trace). When the delivery is acked the ack script keeps the head for `ctx_ttl_s` seconds
 * and returns it, so answering an ack never moves or parses the payload.
 *
 * The head also keeps the delivery's trace context (R-F1): `tp`, the traceparent the frame
 * carries (the dispatch span's when tracing is on, else the routed record's, unchanged), and
 * with tracing on the dispatch span's parent `tpp` and start `t0`, so whichever instance sees
 * the agent's answer records the span and continues the trace.
 *
 * The second line is the exact `deliver` frame of docs/design.md §4. Sending, replaying, publishing to
 * another instance and HTTP push all use that text as-is: the envelope is turned into JSON
 * once, when the delivery is consumed, never per send. JSON never contains a raw newline, so
 * the split is unambiguous.
 *
 * The seq is assigned inside Redis (INCR, atomically with the write), so an entry is built
 * from the head, the seq and the frame's suffix.
 */

export const FRAME_PREFIX = '{"type":"deliver","seq":';

/** The head of an entry: also the context kept for a result after the ack. */
export interface EntryHead {
  /** The delivered message id (a fan-out copy has its own). */
  mid: string;
  parent: string | null;
  attempt: number;
  /** How long after the ack a result may still come (0: none is expected). */
  ctx_ttl_s: number;
  /** The envelope in JSON, without its payload. */
  message: EnvelopeJson;
  /** End of the message's time budget (epoch ms), for the retry decision after a failure. */
  budget_at?: number | null;
  /** The traceparent of the delivery (what the deliver frame carries). */
  tp?: string | null;
  /** With tracing on: the dispatch span's parent and start (epoch ms). */
  tpp?: string | null;
  t0?: number | null;
  /** The routed record the delivery came from: [partition, offset]; a dead letter names it as its source. */
  src?: [number, string] | null;
}

/** The trace context of one delivery (see EntryHead). */
export interface DeliveryTrace {
  traceparent: string | undefined;
  parent?: string | undefined;
  startedAt?: number | undefined;
}

export interface DeliverFrame {
  type: 'deliver';
  seq: number;
  attempt: number;
  deadline: string;
  /** W3C trace context of the delivery: an optional field added to docs/design.md §4's frame. */
  traceparent?: string;
  message: EnvelopeJson;
}

/** Message types no result is ever sent for: their context is not kept after the ack. */
const NO_RESULT_TYPES = new Set(['task_result', RECEIPT_MESSAGE_TYPE]);

/**
 * How long an acked message's context is kept for a result that may follow: until the message
 * expires or times out, at least a minute, at most the replay TTL (5 min when the message gives
 * no bound); 0 for messages nobody answers.
 */
export function resultContextTtlS(message: EnvelopeJson, nowMs: number, maxS: number): number {
  if (NO_RESULT_TYPES.has(String(message.message_type))) return 0;
  const created = createdAtMs(message);
  const expire = typeof message.expire_at === 'string' ? Date.parse(message.expire_at) : NaN;
  const timeout = typeof message.timeout_ms === 'number' ? message.timeout_ms : NaN;
  const bounds = [expire, created + timeout].filter((t) => Number.isFinite(t));
  const s = bounds.length > 0 ? (Math.min(...bounds) - nowMs) / 1000 : 300;
  return Math.ceil(Math.min(maxS, Math.max(60, s)));
}

/** A message's created_at (epoch ms; NaN when unreadable): JSON envelopes carry it as ISO text or a number. */
export function createdAtMs(message: EnvelopeJson): number {
  const created = message.created_at;
  return typeof created === 'string' ? Date.parse(created) : Number(created);
}

/** Where a delivered message's budget starts: its replay time for a dead-letter replay, else created_at (budgetStartOf). */
export function budgetStartMs(message: EnvelopeJson): number {
  const headers = message.headers !== null && typeof message.headers === 'object' ? (message.headers as Record<string, string>) : undefined;
  return budgetStartOf({ created_at: createdAtMs(message), headers });
}

/** What the ack script compares an entry's start with, so an ack names the right message. */
export function midPrefix(messageId: string): string {
  return `{"mid":${JSON.stringify(messageId)},`;
}

export function entryHead(h: EntryHead): string {
  // Key order matters: `mid` first (midPrefix). Trace fields only when known (bytes in Redis).
  return JSON.stringify({
    mid: h.mid,
    parent: h.parent,
    attempt: h.attempt,
    ctx_ttl_s: h.ctx_ttl_s,
    budget_at: h.budget_at ?? null,
    ...(h.tp ? { tp: h.tp } : {}),
    ...(h.tpp ? { tpp: h.tpp } : {}),
    ...(typeof h.t0 === 'number' ? { t0: h.t0 } : {}),
    ...(h.src ? { src: h.src } : {}),
    message: h.message,
  });
}

/** Everything of the deliver frame after its seq. */
export function frameSuffix(attempt: number, deadlineMs: number, message: EnvelopeJson | string): string {
  const part = typeof message === 'string' ? message : messagePart(message);
  return `,"attempt":${attempt},"deadline":${deadlineJson(deadlineMs)}${part}`;
}

/** The deadline as the frame carries it: an RFC 3339 string, quoted. */
export function deadlineJson(deadlineMs: number): string {
  return JSON.stringify(new Date(deadlineMs).toISOString());
}

/**
 * The end of the deliver frame, `[,"traceparent":"…"],"message":{…}}`: what a waiting delivery
 * keeps of its frame, since its seq and ack deadline are only known when it is promoted
 * (buffer-scripts.ts).
 */
export function messagePart(message: EnvelopeJson, traceparent?: string): string {
  return `${traceparent ? `,"traceparent":${JSON.stringify(traceparent)}` : ''},"message":${JSON.stringify(message)}}`;
}

export function buildEntry(head: string, seq: number, suffix: string): string {
  return `${head}\n${FRAME_PREFIX}${seq}${suffix}`;
}

function withoutPayload(message: EnvelopeJson): EnvelopeJson {
  const { payload: _payload, payload_b64: _b64, ...rest } = message;
  return rest;
}

/** The parts of a routed delivery that become its buffer entry. */
export function entryPartsOf(
  d: RoutedDelivery,
  replayTtlS: number,
  nowMs: number = Date.now(),
  trace: DeliveryTrace = { traceparent: undefined },
  source: { partition: number; offset: string } | undefined = undefined,
): { head: string; suffix: string; messagePart: string; envelope: Envelope } {
  // The delivered id is the routed one: a fan-out copy is acked and tracked under its own id.
  const envelope = d.envelope.message_id === d.message_id ? d.envelope : { ...d.envelope, message_id: d.message_id };
  const message = envelopeToJson(envelope);
  const meta = withoutPayload(message);
  const part = messagePart(message, trace.traceparent);
  return {
    head: entryHead({
      mid: d.message_id,
      parent: d.parent_message_id,
      attempt: d.attempt,
      ctx_ttl_s: resultContextTtlS(meta, nowMs, replayTtlS),
      budget_at: d.budget_deadline_at,
      tp: trace.traceparent ?? null,
      tpp: trace.parent ?? null,
      t0: trace.startedAt ?? null,
      src: source ? [source.partition, source.offset] : null,
      message: meta,
    }),
    suffix: frameSuffix(d.attempt, d.deadline_at, part),
    messagePart: part,
    envelope,
  };
}

/** The full envelope of an entry (payload included), read from its deliver frame. */
export function envelopeOfEntry(entry: string): Envelope {
  const frame = JSON.parse(frameOf(entry)) as DeliverFrame;
  const producer = typeof frame.message.producer === 'string' ? frame.message.producer : '';
  return envelopeFromJson(frame.message, { producer });
}

/** The deliver frame text of an entry. */
export function frameOf(entry: string): string {
  return entry.slice(entry.indexOf('\n') + 1);
}

/** The head text of an entry. */
export function headOf(entry: string): string {
  const nl = entry.indexOf('\n');
  return nl < 0 ? entry : entry.slice(0, nl);
}

const SEQ = /^\{"type":"deliver","seq":(\d+),/;

/** The seq of an entry, read from its frame's fixed opening (no JSON parse). */
export function entrySeq(entry: string): number | undefined {
  const nl = entry.indexOf('\n');
  const m = nl < 0 ? null : SEQ.exec(entry.slice(nl + 1, nl + 48));
  return m ? Number(m[1]) : undefined;
}

const FRAME_TRACEPARENT = /^\{"type":"deliver","seq":\d+,"attempt":\d+,"deadline":"[^"]*","traceparent":"([\da-f-]{55})"/;

/** The traceparent of an entry's deliver frame (read at its fixed place, never from the message). */
export function entryTraceparent(entry: string): string | undefined {
  const nl = entry.indexOf('\n');
  return nl < 0 ? undefined : FRAME_TRACEPARENT.exec(entry.slice(nl + 1, nl + 200))?.[1];
}

const FRAME_DEADLINE = /^\{"type":"deliver","seq":\d+,"attempt":\d+,"deadline":"([^"]*)"/;

/** The ack deadline (epoch ms) an entry's deliver frame carries, read at its fixed place. */
export function entryDeadline(entry: string): number | undefined {
  const nl = entry.indexOf('\n');
  const iso = nl < 0 ? undefined : FRAME_DEADLINE.exec(entry.slice(nl + 1, nl + 120))?.[1];
  const ms = iso === undefined ? Number.NaN : Date.parse(iso);
  return Number.isFinite(ms) ? ms : undefined;
}

const MID = /^\{"mid":"([^"\\]+)",/;

/** The delivered message id of an entry (from the head's fixed opening). */
export function entryMessageId(entry: string): string | undefined {
  return MID.exec(entry.slice(0, 128))?.[1];
}

/** An entry's `src` as written by entryHead, else null (entries buffered before it existed). */
function sourceOf(v: unknown): [number, string] | null {
  return Array.isArray(v) && v.length === 2 && Number.isInteger(v[0]) && typeof v[1] === 'string' && /^\d+$/.test(v[1]) ? [v[0] as number, v[1]] : null;
}

/** A dead letter's source position from an entry's head, when it has one (DeadLetterInput.sourcePosition). */
export function sourceOfHead(head: Pick<EntryHead, 'src'>): { sourcePosition?: { partition: number; offset: string } } {
  return head.src ? { sourcePosition: { partition: head.src[0], offset: head.src[1] } } : {};
}

export function parseHead(head: string): EntryHead | undefined {
  try {
    const h = JSON.parse(head) as Partial<EntryHead>;
    if (typeof h.mid !== 'string' || typeof h.message !== 'object' || h.message === null) return undefined;
    return {
      mid: h.mid,
      parent: typeof h.parent === 'string' ? h.parent : null,
      attempt: Number(h.attempt ?? 0),
      ctx_ttl_s: Number(h.ctx_ttl_s ?? 0),
      budget_at: typeof h.budget_at === 'number' ? h.budget_at : null,
      tp: typeof h.tp === 'string' ? h.tp : null,
      tpp: typeof h.tpp === 'string' ? h.tpp : null,
      t0: typeof h.t0 === 'number' ? h.t0 : null,
      src: sourceOf(h.src),
      message: h.message,
    };
  } catch {
    return undefined;
  }
}

/**
 * The envelope of a delivered message, rebuilt from its JSON form for status events (which
 * carry every envelope field but the payload): the payload is left empty.
 */
export function envelopeFromMessageJson(message: EnvelopeJson): Envelope {
  const producer = typeof message.producer === 'string' ? message.producer : '';
  return envelopeFromJson({ ...withoutPayload(message), payload_b64: '' }, { producer });
}

/**
 * A waiting delivery (buffer-scripts.ts): `<window> <budget_at> <queued_at> <attempt>`, its head,
 * and its message part, one per line.
 */
export interface WaitingEntry {
  head: string;
  attempt: number;
  queuedAt: number;
}

const WAITING_META = /^(\d+) (\d+) (\d+) (\d+)\n/;

export function parseWaitingEntry(member: string): (WaitingEntry & { envelope: () => Envelope }) | undefined {
  const m = WAITING_META.exec(member);
  if (!m) return undefined;
  const rest = member.slice(m[0].length);
  const nl = rest.indexOf('\n');
  if (nl < 0) return undefined;
  const part = rest.slice(nl + 1);
  return {
    head: rest.slice(0, nl),
    attempt: Number(m[4]),
    queuedAt: Number(m[3]),
    envelope: () => {
      // `,"message":{…}}` completed into an object of its own.
      const frame = JSON.parse(`{"x":0${part}`) as { message: EnvelopeJson };
      const producer = typeof frame.message.producer === 'string' ? frame.message.producer : '';
      return envelopeFromJson(frame.message, { producer });
    },
  };
}
