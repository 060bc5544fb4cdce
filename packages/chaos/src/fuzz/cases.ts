import { newMessageId, IDEMPOTENCY_KEY_HEADER, TRACEPARENT_HEADER } from '@reach/core';
import { Random, randomBytes, randomJson, randomString } from './random.js';

/**
 * The generated inputs: each starts from a valid input of its kind and mutates a few fields, so
 * most cases reach deep into the code that checks them instead of dying at the first parse.
 */

/** Fields of the envelope as docs/design.md §3's HTTP body names them, and a few that do not exist. */
const BODY_FIELDS = [
  'message_id',
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
  'priority',
  'tags',
  'retryable',
  'timeout_ms',
  'created_at',
  'expire_at',
  'schema_version',
  'content_type',
  'payload',
  'payload_b64',
  'headers',
  'unknown_field',
  '__proto__',
  'constructor',
] as const;

const PAYLOAD_LIMIT = 256 * 1024;

export interface HttpCase {
  readonly body: string | Buffer;
  readonly headers: Record<string, string>;
  /** The query string (with its `?`), or ''. */
  readonly query: string;
}

/** A plausible value for a field, or anything at all. */
function fieldValue(r: Random, field: string, capability: string): unknown {
  if (r.chance(0.4)) return randomJson(r, 2);
  switch (field) {
    case 'priority':
      return r.pick(['HIGH', 'NORMAL', 'LOW', 'high', 'URGENT', '']);
    case 'tags':
      return Array.from({ length: r.int(0, 4) }, () => randomString(r, 20));
    case 'retryable':
      return r.chance(0.5);
    case 'timeout_ms':
      return r.pick([0, 1, 500, 5_000, 30_000, -1, 2 ** 31, 1e12]);
    case 'created_at':
    case 'expire_at':
      return r.pick([Date.now(), Date.now() + 60_000, Date.now() - 3_600_000, 0, -1, 8.64e15, new Date().toISOString(), 'yesterday']);
    case 'schema_version':
      return r.pick([1, 0, -1, 2 ** 31, 1.5]);
    case 'content_type':
      return r.pick(['application/json', 'application/octet-stream', 'text/plain', 'application/json; charset=utf-8', randomString(r, 30)]);
    case 'payload_b64':
      return r.chance(0.5) ? randomBytes(r, PAYLOAD_LIMIT).toString('base64') : randomString(r, 60);
    case 'headers': {
      const h: Record<string, unknown> = {};
      for (let i = r.int(0, 4); i > 0; i--) h[randomString(r, 20)] = r.chance(0.8) ? randomString(r, 40) : randomJson(r, 1);
      return h;
    }
    case 'capability':
      return r.chance(0.5) ? capability : randomString(r, 30);
    case 'payload':
      return r.chance(0.03) ? 'p'.repeat(PAYLOAD_LIMIT + r.int(-100, 100)) : randomJson(r, 3);
    default:
      return randomString(r, 40);
  }
}

/** A POST /v1/messages request: a valid body with 0–3 fields mutated, sometimes not JSON at all, sometimes odd headers. */
export function httpCase(r: Random, capability: string): HttpCase {
  const body: Record<string, unknown> = { capability, payload: randomJson(r, 2) };
  for (let i = r.int(0, 3); i > 0; i--) {
    const field = r.pick(BODY_FIELDS);
    if (r.chance(0.15)) delete body[field];
    else body[field] = fieldValue(r, field, capability);
  }
  // exactly one target most of the time, so many cases are accepted and travel the pipeline
  if (r.chance(0.6)) {
    delete body.topic;
    delete body.target_agent_id;
    body.capability = capability;
  }
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (r.chance(0.05)) headers['content-type'] = r.pick(['text/plain', 'application/x-www-form-urlencoded', '', 'application/json; charset=latin1']);
  if (r.chance(0.1)) headers[IDEMPOTENCY_KEY_HEADER] = headerSafe(randomString(r, 80));
  if (r.chance(0.1)) headers[TRACEPARENT_HEADER] = headerSafe(r.chance(0.5) ? randomString(r, 60) : `00-${'0'.repeat(32)}-${'0'.repeat(16)}-01`);
  const query = r.chance(0.03) ? `?wait_ms=${r.pick(['0', '-1', '500', 'abc', '1e3', '99999999'])}` : '';
  let text: string | Buffer = JSON.stringify(body);
  const shape = r.next();
  if (shape < 0.04)
    text = text.slice(0, r.int(0, text.length)); // truncated JSON
  else if (shape < 0.06) text = randomBytes(r, 1024);
  else if (shape < 0.08) text = JSON.stringify(randomJson(r, 3)); // not an object, or an object of nothing useful
  return { body: text, headers, query };
}

/** HTTP header values must be Latin-1 without CR/LF/NUL, or fetch refuses to send them. */
function headerSafe(s: string): string {
  return s.replace(/[^\u0020-\u007e\u00a0-\u00ff]/g, '?') || 'x';
}

/** An Avro-valid reach.v1.Envelope (every field of the right type): a valid one with 0–3 fields given hostile values. */
export function kafkaEnvelope(r: Random, producer: string, capability: string): Record<string, unknown> {
  const env: Record<string, unknown> = {
    message_id: newMessageId(),
    message_type: 'task_request',
    capability,
    topic: null,
    target_agent_id: null,
    producer,
    trace_id: newMessageId().slice(4).toLowerCase(),
    request_id: null,
    idempotency_key: null,
    session_id: null,
    correlation_id: null,
    reply_to: null,
    priority: 'NORMAL',
    tags: [],
    retryable: true,
    timeout_ms: null,
    created_at: Date.now(),
    expire_at: null,
    schema_version: 1,
    content_type: 'application/json',
    payload: Buffer.from(JSON.stringify(randomJson(r, 3))),
    headers: {},
  };
  const mutations: Record<string, () => unknown> = {
    message_id: () => randomString(r, 30),
    message_type: () => randomString(r, 20),
    capability: () => randomString(r, 30),
    topic: () => randomString(r, 30),
    target_agent_id: () => randomString(r, 30),
    producer: () => randomString(r, 20),
    trace_id: () => randomString(r, 40),
    request_id: () => randomString(r, 40),
    idempotency_key: () => randomString(r, 80),
    session_id: () => randomString(r, 40),
    correlation_id: () => randomString(r, 40),
    reply_to: () => randomString(r, 40),
    priority: () => r.pick(['HIGH', 'NORMAL', 'LOW']),
    tags: () => Array.from({ length: r.int(0, 3) }, () => randomString(r, 20)),
    retryable: () => r.chance(0.5),
    timeout_ms: () => r.pick([0, 1, 500, 5_000, -1, 2 ** 31 - 1, -(2 ** 31)]),
    created_at: () => r.pick([0, -1, 8.64e15, Date.now() + 7_200_000, Date.now() - 86_400_000]),
    expire_at: () => r.pick([Date.now() + 60_000, Date.now() - 1, 0, 8.64e15]),
    schema_version: () => r.pick([0, -1, 2 ** 31 - 1]),
    content_type: () => r.pick(['application/octet-stream', 'text/plain', randomString(r, 30)]),
    payload: () => (r.chance(0.5) ? Buffer.from(randomString(r, 200)) : randomBytes(r, PAYLOAD_LIMIT)),
    headers: () => Object.fromEntries(Array.from({ length: r.int(1, 3) }, () => [randomString(r, 20), randomString(r, 40)])),
  };
  const names = Object.keys(mutations);
  for (let i = r.int(0, 3); i > 0; i--) {
    const field = r.pick(names);
    env[field] = mutations[field]!();
  }
  return env;
}

/** A frame an agent might send on its socket: well-formed or not, known type or not. */
export function agentFrame(r: Random, agentId: string): string | Buffer {
  const k = r.int(0, 9);
  if (k === 0) return randomBytes(r, 4096); // a binary frame
  if (k === 1) return randomString(r, 200); // text that is no JSON
  if (k === 2) return JSON.stringify(randomJson(r, 3));
  const type = r.pick(['ack', 'reject', 'result', 'progress', 'send', 'ping', 'pong', 'refresh_token', 'hello', 'nonsense', randomString(r, 10)]);
  const frame: Record<string, unknown> = { type };
  const fields = [
    'seq',
    'message_id',
    'code',
    'reason',
    'retryable',
    'status',
    'payload',
    'payload_b64',
    'client_ref',
    'capability',
    'token',
    'ts',
    'agent_id',
    'headers',
    'content_type',
  ];
  for (let i = r.int(0, 5); i > 0; i--) {
    const f = r.pick(fields);
    frame[f] = f === 'agent_id' && r.chance(0.5) ? agentId : f === 'seq' && r.chance(0.5) ? r.pick([0, 1, -1, 2 ** 53, 1.5]) : randomJson(r, 2);
  }
  return JSON.stringify(frame);
}

/** How the fuzzed responder answers one delivery. */
export type Answer =
  | { kind: 'result'; status: 'ok' | 'error'; payload: unknown }
  | { kind: 'result-b64'; status: 'ok' | 'error'; bytes: Buffer }
  | { kind: 'reject'; code: unknown; reason: unknown; retryable: boolean }
  | { kind: 'ack' };

export function answerFor(r: Random): Answer {
  const k = r.int(0, 9);
  if (k <= 4)
    return { kind: 'result', status: r.chance(0.8) ? 'ok' : 'error', payload: r.chance(0.02) ? 'r'.repeat(PAYLOAD_LIMIT + r.int(-50, 50)) : randomJson(r, 3) };
  if (k <= 6) return { kind: 'result-b64', status: 'ok', bytes: randomBytes(r, PAYLOAD_LIMIT) };
  // A retryable reject sends the message round again (backoff); kept rare so runs stay short.
  if (k === 7) return { kind: 'reject', code: randomJson(r, 1), reason: randomJson(r, 1), retryable: r.chance(0.1) };
  return { kind: 'ack' };
}
