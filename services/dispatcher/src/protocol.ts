import { errorInfo, type ErrorName, type ReachError } from '@reach/core';
import { isValidTraceparent } from '@reach/tracing';

/**
 * The WebSocket protocol of docs/design.md §4 (public contract): text frames, one JSON object each,
 * told apart by `type`. This module is pure: parsing what agents send (a tolerant reader —
 * unknown fields are ignored, wrong types are refused with 4101) and building what the
 * dispatcher sends.
 */

/** Close codes of docs/design.md §4, plus the standard code used for a connection dropped as slow. */
export const CLOSE = {
  DUPLICATE: 4001,
  AUTH_FAILED: 4003,
  HEARTBEAT_TIMEOUT: 4008,
  FRAME_TOO_LARGE: 4013,
  /** RFC 6455 "try again later": the agent could not keep up (outbound buffer over its limit). */
  SLOW: 1013,
  /** RFC 6455 "going away": this dispatcher instance is shutting down. */
  GOING_AWAY: 1001,
} as const;

export const CONNECT_PATH = '/v1/connect';

export interface HelloFrame {
  type: 'hello';
  agent_id: string | undefined;
  token: string | undefined;
  last_seq: number | undefined;
}

/**
 * `traceparent` (W3C) is an optional field added to docs/design.md §4's frames (R-F1): on
 * `deliver` the delivery's trace context, on `ack`/`reject`/`result` the agent's (the SDK echoes
 * the delivery's); a malformed value is ignored, as W3C Trace Context asks.
 */
export interface AckFrame {
  type: 'ack';
  seq: number;
  message_id: string;
  traceparent: string | undefined;
}

/**
 * `progress` (an addition to docs/design.md §4): the agent is still working on the delivery. Its ack
 * deadline moves to now + the delivery's ack window (the message's timeout_ms, else
 * REACH_ACK_TIMEOUT_MS), so a handler longer than the window is not retried elsewhere while it
 * runs. Nothing is answered; a progress for a delivery already answered is ignored.
 */
export interface ProgressFrame {
  type: 'progress';
  seq: number;
  message_id: string;
}

export interface RejectFrame {
  type: 'reject';
  seq: number;
  message_id: string;
  /** The agent's own code and reason, kept in the status detail. */
  code: number | string | undefined;
  reason: string | undefined;
  retryable: boolean | undefined;
  traceparent: string | undefined;
}

export interface ResultFrame {
  type: 'result';
  message_id: string;
  /**
   * The delivery's seq (optional, an addition to docs/design.md §4): lets a result re-sent on a new
   * connection, after the one it was delivered on died, find its delivery.
   */
  seq: number | undefined;
  status: 'ok' | 'error';
  payload: unknown;
  payload_b64: string | undefined;
  content_type: string | undefined;
  headers: Record<string, string> | undefined;
  traceparent: string | undefined;
}

export interface SendFrame {
  type: 'send';
  client_ref: string | undefined;
  /** The envelope fields in JSON (everything but `type` and `client_ref`). */
  envelope: Record<string, unknown>;
}

export interface PingFrame {
  type: 'ping' | 'pong';
  ts: number | undefined;
}

/**
 * agent → `refresh_token {token}`: a fresh token of the same agent for the open connection
 * (the SDK renews before expiry without reconnecting); server → `token_refreshed {expires_at}`,
 * or `error` 1003 and close 4003 when the token is not valid for this agent. An extension of
 * docs/design.md §4: an agent that never sends it is closed with 4003 when its token expires.
 */
export interface RefreshTokenFrame {
  type: 'refresh_token';
  token: string;
}

/**
 * agent → `subscribe_routes {}` (an extension of docs/design.md §4, R-G6): the agent wants the
 * pre-flight view of what it can reach — server → `routes {full: true, capabilities, topics}`
 * at once, then `routes {full: false, …}` with what changed (routes-feed.ts).
 */
export interface SubscribeRoutesFrame {
  type: 'subscribe_routes';
}

export type AgentFrame = HelloFrame | AckFrame | ProgressFrame | RejectFrame | ResultFrame | SendFrame | PingFrame | RefreshTokenFrame | SubscribeRoutesFrame;

/** A frame that could not be understood; the connection stays open and gets an `error` frame. */
export interface FrameError {
  type: 'invalid';
  message: string;
  /** Echoed in the error frame so an SDK can match it to its `send`. */
  client_ref?: string;
}

function obj(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

function optString(f: Record<string, unknown>, field: string): string | undefined {
  const v = f[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new Error(`${field} must be a string`);
  return v;
}

function reqString(f: Record<string, unknown>, field: string): string {
  const v = optString(f, field);
  if (!v) throw new Error(`${field} is required`);
  return v;
}

function seqOf(f: Record<string, unknown>, field: string, required: boolean): number | undefined {
  const v = f[field];
  if (v === undefined || v === null) {
    if (required) throw new Error(`${field} is required`);
    return undefined;
  }
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw new Error(`${field} must be a non-negative integer`);
  return v;
}

/** An optional traceparent: kept when well formed, else ignored (never a reason to refuse a frame). */
function traceparentOf(f: Record<string, unknown>): string | undefined {
  const v = f.traceparent;
  return typeof v === 'string' && isValidTraceparent(v) ? v.trim() : undefined;
}

function stringMap(f: Record<string, unknown>, field: string): Record<string, string> | undefined {
  const v = f[field];
  if (v === undefined || v === null) return undefined;
  const o = obj(v);
  if (!o || Object.values(o).some((x) => typeof x !== 'string')) throw new Error(`${field} must be an object of strings`);
  return o as Record<string, string>;
}

/** Parses one inbound text frame. */
export function parseAgentFrame(text: string): AgentFrame | FrameError {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { type: 'invalid', message: 'frame is not valid JSON' };
  }
  const f = obj(raw);
  if (!f) return { type: 'invalid', message: 'frame must be a JSON object' };
  const clientRef = typeof f.client_ref === 'string' ? f.client_ref : undefined;
  try {
    switch (f.type) {
      case 'hello':
        return { type: 'hello', agent_id: optString(f, 'agent_id'), token: optString(f, 'token'), last_seq: seqOf(f, 'last_seq', false) };
      case 'ack':
        return { type: 'ack', seq: seqOf(f, 'seq', true)!, message_id: reqString(f, 'message_id'), traceparent: traceparentOf(f) };
      case 'progress':
        return { type: 'progress', seq: seqOf(f, 'seq', true)!, message_id: reqString(f, 'message_id') };
      case 'reject': {
        const code = f.code;
        if (code !== undefined && code !== null && typeof code !== 'number' && typeof code !== 'string') throw new Error('code must be a number or a string');
        const retryable = f.retryable;
        if (retryable !== undefined && retryable !== null && typeof retryable !== 'boolean') throw new Error('retryable must be a boolean');
        return {
          type: 'reject',
          seq: seqOf(f, 'seq', true)!,
          message_id: reqString(f, 'message_id'),
          code: (code ?? undefined) as number | string | undefined,
          reason: optString(f, 'reason'),
          retryable: (retryable ?? undefined) as boolean | undefined,
          traceparent: traceparentOf(f),
        };
      }
      case 'result': {
        const status = f.status ?? 'ok';
        if (status !== 'ok' && status !== 'error') throw new Error('status must be "ok" or "error"');
        return {
          type: 'result',
          message_id: reqString(f, 'message_id'),
          seq: seqOf(f, 'seq', false),
          status,
          payload: f.payload,
          payload_b64: optString(f, 'payload_b64'),
          content_type: optString(f, 'content_type'),
          headers: stringMap(f, 'headers'),
          traceparent: traceparentOf(f),
        };
      }
      case 'send': {
        const { type: _type, client_ref: _ref, ...envelope } = f;
        return { type: 'send', client_ref: clientRef, envelope };
      }
      case 'ping':
      case 'pong':
        return { type: f.type, ts: typeof f.ts === 'number' && Number.isFinite(f.ts) ? f.ts : undefined };
      case 'refresh_token':
        return { type: 'refresh_token', token: reqString(f, 'token') };
      case 'subscribe_routes':
        return { type: 'subscribe_routes' };
      default:
        return {
          type: 'invalid',
          message: `unknown frame type ${JSON.stringify(f.type ?? null).slice(0, 60)}`,
          ...(clientRef ? { client_ref: clientRef } : {}),
        };
    }
  } catch (err) {
    return { type: 'invalid', message: `${String(f.type)}: ${(err as Error).message}`, ...(clientRef ? { client_ref: clientRef } : {}) };
  }
}

// ── frames the dispatcher sends ────────────────────────────────────────────────────────────

export function welcomeFrame(connectionId: string, heartbeatMs: number, resumeFrom: number): string {
  return JSON.stringify({ type: 'welcome', connection_id: connectionId, heartbeat_ms: heartbeatMs, resume_from: resumeFrom });
}

export function errorFrame(name: ErrorName, message: string, clientRef?: string): string {
  const { code } = errorInfo(name);
  return JSON.stringify({ type: 'error', code, name, message, ...(clientRef !== undefined ? { client_ref: clientRef } : {}) });
}

export function errorFrameOf(err: ReachError, clientRef?: string): string {
  return errorFrame(err.codeName, err.message, clientRef);
}

export function acceptedFrame(clientRef: string | undefined, messageId: string): string {
  return JSON.stringify({ type: 'accepted', client_ref: clientRef ?? null, message_id: messageId });
}

/** The connection now runs on the token of a `refresh_token` frame; `exp` in epoch seconds. */
export function tokenRefreshedFrame(exp: number): string {
  return JSON.stringify({ type: 'token_refreshed', expires_at: new Date(exp * 1000).toISOString() });
}

export function pingFrame(ts: number): string {
  return JSON.stringify({ type: 'ping', ts });
}

export function pongFrame(ts: number): string {
  return JSON.stringify({ type: 'pong', ts });
}

/**
 * The pre-flight view (R-G6): by capability and by topic, 0 when a message would be routed,
 * else the code it would be refused with (2001, 2003, 3001); in a change (`full` false), null
 * removes a name.
 */
export function routesFrame(full: boolean, capabilities: Record<string, number | null>, topics: Record<string, number | null>): string {
  return JSON.stringify({ type: 'routes', full, capabilities, topics });
}
