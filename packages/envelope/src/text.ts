import { isUtf8 } from 'node:buffer';
import { ReachError } from '@reach/core';
import type { Envelope } from './generated/schemas.js';

/**
 * What every public door (HTTP ingress, Kafka ingress, the dispatcher's `send` and `result`
 * frames, HTTP push answers) checks in the text it takes in, so that nothing is accepted that a
 * later stage cannot carry (docs/protocol.md, "Text the doors refuse"):
 *
 * - a lone UTF-16 surrogate (`"\ud83d"`) is not Unicode text: UTF-8 cannot encode it (Node
 *   turns it into U+FFFD, silently) and PostgreSQL refuses it in jsonb. Refused everywhere,
 *   in the payload too (4101, `details.field`).
 * - NUL (U+0000) is valid JSON and stays in a payload or result byte for byte, but PostgreSQL
 *   text cannot hold it: refused in the envelope's string fields (ids, tags, headers,
 *   content_type), which the read model stores as text.
 * - a payload labelled JSON must be UTF-8: other bytes would be decoded with replacement
 *   characters, i.e. changed.
 *
 * Free text that only describes a failure (a reject's reason) is normalized instead of refused:
 * refusing it would lose the refusal itself (toStorableText).
 */

// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');
// In JSON text a surrogate can only hide in a \uD8xx–\uDFxx escape (UTF-8 bytes cannot hold one).
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/** Why `s` cannot be carried as text (undefined: it can). NUL is a problem unless `allowNul`. */
export function textProblem(s: string, allowNul = false): string | undefined {
  if (LONE_SURROGATE.test(s)) return 'holds a lone UTF-16 surrogate, which is not Unicode text';
  if (!allowNul && s.includes('\0')) return 'holds a NUL character (U+0000)';
  return undefined;
}

function refused(field: string, problem: string): ReachError {
  return new ReachError('INVALID_ENVELOPE', `${field} ${problem}`, { details: { field, problem } });
}

/** A string field: refused (4101 naming `field`) when it holds a lone surrogate or NUL. */
export function checkText(value: string | null | undefined, field: string, allowNul = false): ReachError | undefined {
  if (value === null || value === undefined) return undefined;
  const problem = textProblem(value, allowNul);
  return problem === undefined ? undefined : refused(field, problem);
}

/**
 * A parsed JSON value: refused when a string or key in it holds a lone surrogate. NUL stays
 * (JSON carries it, and the payload is kept as bytes). Iterative: a deeply nested value must
 * not overflow the stack.
 */
export function checkJsonValue(value: unknown, field: string): ReachError | undefined {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (LONE_SURROGATE.test(v)) return refused(field, 'holds a lone UTF-16 surrogate, which is not Unicode text');
    } else if (Array.isArray(v)) {
      for (const item of v) stack.push(item);
    } else if (v !== null && typeof v === 'object') {
      for (const [k, item] of Object.entries(v)) {
        stack.push(k, item);
      }
    }
  }
  return undefined;
}

/**
 * JSON payload bytes (a JSON content type): refused when they are not UTF-8, or when, parsed,
 * they hold a lone surrogate. Bytes that are UTF-8 but not JSON pass: they are handed to the
 * agent untouched as `payload_b64`. The common payload (no surrogate escape) is not parsed.
 */
export function checkJsonPayload(payload: Buffer, field = 'payload'): ReachError | undefined {
  if (!isUtf8(payload)) return refused(field, 'is labelled JSON but is not UTF-8');
  const text = payload.toString('utf8');
  if (!SURROGATE_ESCAPE.test(text)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  return checkJsonValue(parsed, field);
}

/** A text payload sent as a JSON string (HTTP/`send` with a non-JSON content type) before it becomes UTF-8. */
export function checkTextPayload(payload: string, field = 'payload'): ReachError | undefined {
  return checkText(payload, field, true);
}

const STRING_FIELDS = [
  'message_type',
  'capability',
  'topic',
  'target_agent_id',
  'producer',
  'trace_id',
  'request_id',
  'idempotency_key',
  'session_id',
  'correlation_id',
  'reply_to',
  'content_type',
] as const;

/** Every string of an envelope (fields, tags, header names and values) and, when JSON, its payload. */
export function checkEnvelopeText(env: Envelope, isJson: boolean): ReachError | undefined {
  for (const field of STRING_FIELDS) {
    const bad = checkText(env[field], field);
    if (bad) return bad;
  }
  for (const [i, tag] of env.tags.entries()) {
    const bad = checkText(tag, `tags[${i}]`);
    if (bad) return bad;
  }
  const headerError = checkHeaders(env.headers, 'headers');
  if (headerError) return headerError;
  return isJson ? checkJsonPayload(env.payload) : undefined;
}

/** A map of string headers: names and values. */
export function checkHeaders(headers: Readonly<Record<string, string>> | undefined, field: string): ReachError | undefined {
  for (const [name, value] of Object.entries(headers ?? {})) {
    const bad = checkText(name, `${field}.${JSON.stringify(name).slice(1, -1).slice(0, 64)}`) ?? checkText(value, `${field}.${name.slice(0, 64)}`);
    if (bad) return bad;
  }
  return undefined;
}

/** A handler's result as a `result` frame or an HTTP push answer carries it. */
export interface ResultPayload {
  payload?: unknown;
  payload_b64?: string | undefined;
  content_type?: string | undefined;
  headers?: Readonly<Record<string, string>> | undefined;
}

/**
 * A result the dispatcher can record and hand on: at most `maxPayloadBytes` of payload (4102),
 * counted as the protocol counts a payload — the decoded bytes of `payload_b64`, else the UTF-8
 * bytes of the JSON text, never the base64 text or the frame — and text that every later stage
 * can carry (4101 naming the field).
 */
export function checkResult(r: ResultPayload, maxPayloadBytes: number): ReachError | undefined {
  const json = r.payload_b64 === undefined ? JSON.stringify(r.payload ?? null) : undefined;
  const bytes = json === undefined ? Buffer.byteLength(r.payload_b64!, 'base64') : Buffer.byteLength(json);
  if (bytes > maxPayloadBytes) {
    return new ReachError('PAYLOAD_TOO_LARGE', `result payload is ${bytes} bytes; the limit is ${maxPayloadBytes}`, {
      details: { field: 'payload', bytes, limit: maxPayloadBytes },
    });
  }
  const text = checkText(r.content_type, 'content_type') ?? checkHeaders(r.headers, 'headers');
  if (text) return text;
  // JSON.stringify writes a lone surrogate as a \uD8xx–\uDFxx escape: only then walk the value.
  return json !== undefined && SURROGATE_ESCAPE.test(json) ? checkJsonValue(r.payload, 'payload') : undefined;
}

/**
 * Free text that only describes something (a reject's reason): lone surrogates and NUL become
 * U+FFFD, so the text can be stored and shown; refusing it would lose the refusal it explains.
 */
export function toStorableText(s: string): string {
  const wellFormed = LONE_SURROGATE.test(s) ? s.replace(LONE_SURROGATES, '\uFFFD') : s;
  return wellFormed.includes('\0') ? wellFormed.replace(/\0/g, '\uFFFD') : wellFormed;
}
