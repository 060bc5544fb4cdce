import { ERROR } from '@reach/core';
import type { ReachMessage } from './types.js';

/**
 * WebSocket frames of docs/design.md §4: text frames, one JSON object each, told apart by `type`.
 * Parsing is a tolerant reader: unknown frame types and unknown fields are ignored, missing
 * optional fields get their defaults, so a newer dispatcher never breaks an older SDK.
 */

export interface WelcomeFrame {
  type: 'welcome';
  connection_id: string;
  heartbeat_ms: number | undefined;
  resume_from: number | undefined;
}

export interface DeliverFrame {
  type: 'deliver';
  seq: number;
  attempt: number;
  /** Epoch ms of the ack deadline, when the server gave one. */
  deadline: number | undefined;
  /**
   * W3C trace context of the delivery (an optional field added to docs/design.md §4's frame): the
   * answer frames and whatever a handler sends carry it on, so the trace continues.
   */
  traceparent: string | undefined;
  message: ReachMessage;
}

export interface AcceptedFrame {
  type: 'accepted';
  client_ref: string;
  message_id: string;
}

export interface ErrorFrame {
  type: 'error';
  code: number;
  name: string;
  message: string;
  client_ref: string | undefined;
}

export interface PingFrame {
  type: 'ping' | 'pong';
  ts: number;
}

/**
 * server → `routes` (an addition to docs/design.md §4, answering `subscribe_routes`): what this agent can
 * reach now, by capability and by topic — 0, or the code a message would be refused with
 * (2001, 2003, 3001). `full` replaces the view; otherwise the entries change, null removes one.
 */
export interface RoutesFrame {
  type: 'routes';
  full: boolean;
  capabilities: Record<string, number | null>;
  topics: Record<string, number | null>;
}

export type ServerFrame = WelcomeFrame | DeliverFrame | AcceptedFrame | ErrorFrame | PingFrame | RoutesFrame;

export type AgentFrame =
  | { type: 'hello'; agent_id: string; token: string; last_seq?: number }
  /** Asks for the `routes` view (pre-flight, R-G6): a full one now, changes after. */
  | { type: 'subscribe_routes' }
  | { type: 'ack'; seq: number; message_id: string; traceparent?: string }
  /** "Still working on it": extends the delivery's ack deadline by its ack window (docs/design.md §4 addition). */
  | { type: 'progress'; seq: number; message_id: string }
  | { type: 'reject'; seq: number; message_id: string; code: number; reason: string; retryable: boolean; traceparent?: string }
  | {
      type: 'result';
      message_id: string;
      /** The delivery's seq: a result re-sent after a reconnect finds its delivery by it. */
      seq?: number;
      status: 'ok' | 'error';
      payload?: unknown;
      payload_b64?: string;
      content_type?: string;
      headers?: Record<string, string>;
      traceparent?: string;
    }
  | ({ type: 'send'; client_ref: string } & Record<string, unknown>)
  | { type: 'ping' | 'pong'; ts: number }
  /** A renewed token for the open connection (the dispatcher answers `token_refreshed`, or closes 4003). */
  | { type: 'refresh_token'; token: string };

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function strOrNull(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

const TRACEPARENT = /^[\da-f]{2}-[\da-f]{32}-[\da-f]{16}-[\da-f]{2}$/;

/** A W3C traceparent as given when well formed (lower-case hex, ids not all zero), else undefined. */
export function parseTraceparent(v: unknown): string | undefined {
  if (typeof v !== 'string' || !TRACEPARENT.test(v) || v.startsWith('ff-')) return undefined;
  const [, traceId, spanId] = v.split('-');
  return /^0+$/.test(traceId!) || /^0+$/.test(spanId!) ? undefined : v;
}

/** A deadline as epoch ms, from an RFC 3339 string or a number. */
export function parseDeadline(v: unknown): number | undefined {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v === 'string') {
    const t = /^\d+$/.test(v) ? Number(v) : Date.parse(v);
    return Number.isNaN(t) ? undefined : t;
  }
  return undefined;
}

/** Fills the defaults of the envelope JSON so handlers never see `undefined` where the schema has a default. */
export function normaliseMessage(raw: Record<string, unknown>): ReachMessage | undefined {
  const message_id = str(raw.message_id);
  if (!message_id) return undefined;
  const headers: Record<string, string> = {};
  if (raw.headers && typeof raw.headers === 'object' && !Array.isArray(raw.headers)) {
    for (const [k, v] of Object.entries(raw.headers as Record<string, unknown>)) if (typeof v === 'string') headers[k] = v;
  }
  const msg: ReachMessage = {
    message_id,
    message_type: str(raw.message_type) ?? 'task_request',
    capability: strOrNull(raw.capability),
    topic: strOrNull(raw.topic),
    target_agent_id: strOrNull(raw.target_agent_id),
    producer: str(raw.producer) ?? '',
    trace_id: str(raw.trace_id) ?? '',
    request_id: strOrNull(raw.request_id),
    idempotency_key: strOrNull(raw.idempotency_key),
    session_id: strOrNull(raw.session_id),
    correlation_id: strOrNull(raw.correlation_id),
    reply_to: strOrNull(raw.reply_to),
    priority: raw.priority === 'HIGH' || raw.priority === 'LOW' ? raw.priority : 'NORMAL',
    tags: Array.isArray(raw.tags) ? raw.tags.filter((t): t is string => typeof t === 'string') : [],
    retryable: typeof raw.retryable === 'boolean' ? raw.retryable : true,
    timeout_ms: num(raw.timeout_ms) ?? null,
    created_at: typeof raw.created_at === 'number' ? new Date(raw.created_at).toISOString() : (str(raw.created_at) ?? ''),
    expire_at: typeof raw.expire_at === 'number' ? new Date(raw.expire_at).toISOString() : strOrNull(raw.expire_at),
    schema_version: num(raw.schema_version) ?? 1,
    content_type: str(raw.content_type) ?? 'application/json',
    headers,
  };
  if ('payload' in raw) msg.payload = raw.payload;
  if (typeof raw.payload_b64 === 'string') msg.payload_b64 = raw.payload_b64;
  return msg;
}

/** A `routes` map: name → code (or null: removed); anything else is dropped. */
function codes(v: unknown): Record<string, number | null> {
  const out: Record<string, number | null> = {};
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return out;
  for (const [k, c] of Object.entries(v as Record<string, unknown>))
    if (c === null || (typeof c === 'number' && Number.isInteger(c))) out[k] = c as number | null;
  return out;
}

/** Parses one inbound text frame; undefined for frames this SDK does not understand. */
export function parseServerFrame(text: string): ServerFrame | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const f = raw as Record<string, unknown>;
  switch (f.type) {
    case 'welcome':
      return { type: 'welcome', connection_id: str(f.connection_id) ?? '', heartbeat_ms: num(f.heartbeat_ms), resume_from: num(f.resume_from) };
    case 'deliver': {
      const seq = num(f.seq);
      const message = f.message && typeof f.message === 'object' ? normaliseMessage(f.message as Record<string, unknown>) : undefined;
      if (seq === undefined || !message) return undefined;
      return { type: 'deliver', seq, attempt: num(f.attempt) ?? 0, deadline: parseDeadline(f.deadline), traceparent: parseTraceparent(f.traceparent), message };
    }
    case 'accepted': {
      const ref = str(f.client_ref);
      const id = str(f.message_id);
      return ref && id ? { type: 'accepted', client_ref: ref, message_id: id } : undefined;
    }
    case 'error':
      return {
        type: 'error',
        code: num(f.code) ?? ERROR.INTERNAL,
        name: str(f.name) ?? 'INTERNAL',
        message: str(f.message) ?? '',
        client_ref: str(f.client_ref),
      };
    case 'ping':
    case 'pong':
      return { type: f.type, ts: num(f.ts) ?? Date.now() };
    case 'routes':
      return { type: 'routes', full: f.full === true, capabilities: codes(f.capabilities), topics: codes(f.topics) };
    default:
      return undefined;
  }
}
