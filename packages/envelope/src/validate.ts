import { ReachError, MESSAGE_ID_PATTERN, ENVELOPE_NAME_PATTERN } from '@reach/core';
import type { Envelope } from './generated/schemas.js';
import { isJsonContentType } from './json.js';
import { checkEnvelopeText } from './text.js';

export interface EnvelopeLimits {
  maxPayloadBytes: number;
  /** Largest future skew accepted on created_at (Kafka itself refuses records > 1 h ahead). */
  maxClockSkewMs?: number;
}

/** 10000-01-01T00:00:00Z: the first instant a four-digit-year timestamp cannot spell. */
export const LATEST_EXPIRY = Date.UTC(10000, 0, 1);

function bad(message: string, field: string): ReachError {
  return new ReachError('INVALID_ENVELOPE', message, { details: { field } });
}

/**
 * The structural rules every envelope must satisfy, on both ingress paths (Kafka and HTTP), so
 * they validate identically (R-C1). Returns the first violation, or undefined.
 */
export function validateEnvelope(env: Envelope, limits: EnvelopeLimits, now: number = Date.now()): ReachError | undefined {
  if (!MESSAGE_ID_PATTERN.test(env.message_id)) return bad(`message_id ${JSON.stringify(env.message_id)} is not msg_ + ULID`, 'message_id');
  if (!ENVELOPE_NAME_PATTERN.test(env.message_type)) return bad('message_type must be a non-empty name of letters, digits and _.:-', 'message_type');
  const targets = [env.capability, env.topic, env.target_agent_id].filter((t) => t !== null && t !== undefined);
  if (targets.length !== 1) {
    return bad(`exactly one of capability, topic, target_agent_id must be set (got ${targets.length})`, 'capability|topic|target_agent_id');
  }
  for (const field of ['capability', 'topic', 'target_agent_id', 'producer', 'reply_to', 'session_id'] as const) {
    const v = env[field];
    if (v !== null && v !== undefined && !ENVELOPE_NAME_PATTERN.test(v)) return bad(`${field} ${JSON.stringify(v).slice(0, 80)} is not a valid name`, field);
  }
  if (!env.trace_id || env.trace_id.length > 128) return bad('trace_id must be 1–128 characters', 'trace_id');
  for (const field of ['request_id', 'idempotency_key', 'correlation_id'] as const) {
    const v = env[field];
    if (v !== null && v !== undefined && (v.length === 0 || v.length > 256)) return bad(`${field} must be 1–256 characters`, field);
  }
  if (env.payload.length > limits.maxPayloadBytes) {
    return new ReachError('PAYLOAD_TOO_LARGE', `payload is ${env.payload.length} bytes; the limit is ${limits.maxPayloadBytes}`, {
      details: { field: 'payload' },
    });
  }
  if (env.timeout_ms !== null && env.timeout_ms !== undefined && env.timeout_ms <= 0) return bad('timeout_ms must be positive', 'timeout_ms');
  const skew = limits.maxClockSkewMs ?? 5 * 60_000;
  if (env.created_at <= 0 || env.created_at > now + skew) return bad('created_at is not a plausible time (in the future or before 1970)', 'created_at');
  if (env.expire_at !== null && env.expire_at !== undefined) {
    if (env.expire_at <= env.created_at) return bad('expire_at must be after created_at', 'expire_at');
    // Every store and every SQL cast reads a four-digit year; a later expiry is "never" spelt badly.
    if (env.expire_at >= LATEST_EXPIRY) return bad('expire_at must be before the year 10000 (leave it out for no expiry)', 'expire_at');
  }
  if (env.tags.length > 64 || env.tags.some((t) => t.length === 0 || t.length > 128)) return bad('tags: at most 64, each 1–128 characters', 'tags');
  const headerCount = Object.keys(env.headers).length;
  if (headerCount > 64) return bad('headers: at most 64 entries', 'headers');
  // Last: the cheap structural rules name the usual mistake first.
  return checkEnvelopeText(env, isJsonContentType(env.content_type));
}
