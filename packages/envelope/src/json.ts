import { randomBytes } from 'node:crypto';
import { ReachError, newMessageId } from '@reach/core';
import type { Envelope, Priority } from './generated/schemas.js';
import { checkTextPayload, toStorableText } from './text.js';

/**
 * The JSON form of an envelope, used by the HTTP API (docs/design.md §3) and WebSocket frames (§4):
 * snake_case Avro field names; timestamps as RFC 3339 strings in responses and RFC 3339 or
 * epoch milliseconds in requests; `payload` as JSON when content_type is JSON, else
 * `payload_b64`. The payload stays opaque: it is carried as bytes, never interpreted.
 */
export type EnvelopeJson = Record<string, unknown>;

function bad(field: string, message: string): ReachError {
  return new ReachError('INVALID_ENVELOPE', `${field}: ${message}`, { details: { field } });
}

function optString(body: EnvelopeJson, field: string): string | null {
  const v = body[field];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw bad(field, 'must be a string');
  return v;
}

export function parseTime(v: unknown, field: string): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v === 'number' && Number.isFinite(v)) return Math.trunc(v);
  if (typeof v === 'string') {
    if (/^\d+$/.test(v)) return Number(v);
    const t = Date.parse(v);
    if (!Number.isNaN(t)) return t;
  }
  throw bad(field, 'must be an RFC 3339 time or epoch milliseconds');
}

const PRIORITIES: readonly Priority[] = ['HIGH', 'NORMAL', 'LOW'];

export function isJsonContentType(ct: string): boolean {
  return /^application\/(.+\+)?json\b/i.test(ct);
}

/** A W3C trace id (32 hex) from a traceparent header, or a fresh one. */
export function traceIdFrom(traceparent: string | undefined): string {
  const m = traceparent ? /^[\da-f]{2}-([\da-f]{32})-[\da-f]{16}-[\da-f]{2}$/i.exec(traceparent.trim()) : null;
  return m ? m[1]!.toLowerCase() : randomBytes(16).toString('hex');
}

export interface FromJsonContext {
  /** The authenticated producer; a body `producer` that disagrees is refused (1003). */
  producer: string;
  now?: number;
  /** From the Idempotency-Key header; a body field that disagrees is refused. */
  idempotencyKey?: string;
  traceparent?: string;
}

/**
 * Builds an envelope from a JSON request body. Missing ids and times are filled in; only
 * shape is checked here — the rules (exactly one target, sizes, ...) are validateEnvelope's,
 * shared with the Kafka path.
 */
export function envelopeFromJson(input: unknown, ctx: FromJsonContext): Envelope {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw bad('body', 'must be a JSON object');
  const body = input as EnvelopeJson;
  const now = ctx.now ?? Date.now();
  const producer = optString(body, 'producer');
  if (producer !== null && producer !== ctx.producer) {
    throw new ReachError('AUTH_FAILED', `producer ${producer} is not the token's agent ${ctx.producer}`, { details: { field: 'producer' } });
  }
  const bodyKey = optString(body, 'idempotency_key');
  if (ctx.idempotencyKey && bodyKey && bodyKey !== ctx.idempotencyKey) throw bad('idempotency_key', 'differs from the Idempotency-Key header');
  const priority = (optString(body, 'priority') ?? 'NORMAL').toUpperCase() as Priority;
  if (!PRIORITIES.includes(priority)) throw bad('priority', 'must be HIGH, NORMAL or LOW');
  const contentType = optString(body, 'content_type') ?? 'application/json';
  let payload: Buffer;
  if (body.payload_b64 !== undefined) {
    if (typeof body.payload_b64 !== 'string') throw bad('payload_b64', 'must be a base64 string');
    payload = Buffer.from(body.payload_b64, 'base64');
  } else if (isJsonContentType(contentType)) {
    payload = Buffer.from(body.payload === undefined ? 'null' : JSON.stringify(body.payload));
  } else {
    if (typeof body.payload !== 'string') throw bad('payload', `a ${contentType} payload must be a string or payload_b64`);
    // Checked before it becomes UTF-8, which would turn a lone surrogate into U+FFFD unseen.
    const refused = checkTextPayload(body.payload);
    if (refused) throw refused;
    payload = Buffer.from(body.payload, 'utf8');
  }
  const tags = body.tags ?? [];
  if (!Array.isArray(tags) || tags.some((t) => typeof t !== 'string')) throw bad('tags', 'must be an array of strings');
  const headers = body.headers ?? {};
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers) || Object.values(headers).some((v) => typeof v !== 'string')) {
    throw bad('headers', 'must be an object of strings');
  }
  const retryable = body.retryable ?? true;
  if (typeof retryable !== 'boolean') throw bad('retryable', 'must be a boolean');
  const timeout = body.timeout_ms ?? null;
  if (timeout !== null && (typeof timeout !== 'number' || !Number.isInteger(timeout))) throw bad('timeout_ms', 'must be an integer');
  const schemaVersion = body.schema_version ?? 1;
  if (typeof schemaVersion !== 'number' || !Number.isInteger(schemaVersion)) throw bad('schema_version', 'must be an integer');
  return {
    message_id: optString(body, 'message_id') ?? newMessageId(now),
    message_type: optString(body, 'message_type') ?? 'task_request',
    capability: optString(body, 'capability'),
    topic: optString(body, 'topic'),
    target_agent_id: optString(body, 'target_agent_id'),
    producer: ctx.producer,
    trace_id: optString(body, 'trace_id') ?? traceIdFrom(ctx.traceparent),
    request_id: optString(body, 'request_id'),
    idempotency_key: ctx.idempotencyKey ?? bodyKey,
    session_id: optString(body, 'session_id'),
    correlation_id: optString(body, 'correlation_id'),
    reply_to: optString(body, 'reply_to'),
    priority,
    tags: tags as string[],
    retryable,
    timeout_ms: timeout as number | null,
    created_at: parseTime(body.created_at, 'created_at') ?? now,
    expire_at: parseTime(body.expire_at, 'expire_at'),
    schema_version: schemaVersion,
    content_type: contentType,
    payload,
    headers: headers as Record<string, string>,
  };
}

/** Decodes a payload for JSON output: parsed JSON when the content type says so, else base64. */
export function payloadToJson(contentType: string, payload: Buffer): { payload?: unknown; payload_b64?: string } {
  if (isJsonContentType(contentType)) {
    try {
      return { payload: JSON.parse(payload.toString('utf8')) as unknown };
    } catch {
      // a producer labelled bytes JSON that are not: hand them over untouched
    }
  }
  return { payload_b64: payload.toString('base64') };
}

/** The JSON form of an envelope (for `deliver` frames and API responses). */
export function envelopeToJson(env: Envelope): EnvelopeJson {
  const { payload, created_at, expire_at, ...rest } = env;
  return {
    ...rest,
    created_at: new Date(created_at).toISOString(),
    expire_at: expire_at === null ? null : new Date(expire_at).toISOString(),
    ...payloadToJson(env.content_type, payload),
  };
}

/**
 * The JSON form of an envelope as PostgreSQL jsonb can hold it (the dead-letter store): jsonb
 * cannot hold NUL (`\u0000`) or a lone surrogate, both of which a payload may carry (NUL is
 * accepted at the door, and records older than the door's checks may hold anything). Such a
 * payload is kept as `payload_b64`, byte for byte; string fields are made storable
 * (toStorableText). An ordinary envelope is exactly envelopeToJson's.
 */
export function storableEnvelopeJson(env: Envelope): EnvelopeJson {
  const json = envelopeToJson(env);
  if (!UNSTORABLE_IN_JSONB.test(JSON.stringify(json))) return json;
  const { payload: _payload, ...rest } = json;
  const out: EnvelopeJson = {};
  for (const [k, v] of Object.entries(rest)) out[k] = storableValue(v);
  out.payload_b64 = env.payload.toString('base64');
  return out;
}

// What jsonb refuses in JSON.stringify's text: the escape of NUL, and that of a lone surrogate
// (paired ones are written as characters). An escaped backslash before "u0000" matches too,
// harmlessly: that payload is stored as payload_b64, which loses nothing either.
const UNSTORABLE_IN_JSONB = /\\u0000|\\u[dD][89a-fA-F]/;

function storableValue(v: unknown): unknown {
  if (typeof v === 'string') return toStorableText(v);
  if (Array.isArray(v)) return v.map(storableValue);
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, item] of Object.entries(v)) out[toStorableText(k)] = storableValue(item);
    return out;
  }
  return v;
}
