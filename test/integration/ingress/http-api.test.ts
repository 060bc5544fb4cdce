import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { ulid } from 'ulid';
import { silentLogger } from '../../../packages/core/dist/index.js';
import { createRedis, type Redis } from '../../../packages/store/dist/index.js';
import { plainKafka, registryClient, TopicTap } from '../../helpers/kafka.js';
import { adminToken, stack, uniq, urls } from '../../helpers/env.js';
import { registerProducer, type ProducerAgent } from './producer-agent.js';

// The public message API of docs/design.md §3 on the running ingress: submit over HTTP, then follow
// the message through the read model the tracker writes (message, timeline, trace). Real
// Kafka, Redis, PostgreSQL, tracker and router: nothing is mocked.
const kafka = plainKafka();
const registry = registryClient();
let agent: ProducerAgent;
let pending: TopicTap<Record<string, unknown>>;
let dlq: TopicTap<Record<string, unknown>>;
let redis: Redis;
let kafkaProducer: Producer;

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

// Response bodies are read field by field in assertions; their shapes are what is under test.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>;

interface Answer {
  status: number;
  body: Json;
  headers: Headers;
}

async function call(
  method: string,
  path: string,
  opts: { token?: string | null; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...opts.headers };
  const token = opts.token === undefined ? agent.token : opts.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  let body: string | undefined = opts.raw;
  if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] = 'application/json';
  }
  const res = await fetch(`${urls.ingress}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Json) : {}, headers: res.headers };
}

/** A message nobody serves that the router parks (it has an expire_at, R-B10): it stays PENDING. */
function parked(extra: Record<string, unknown> = {}) {
  return { capability: uniq('nobody_serves'), expire_at: new Date(Date.now() + 10 * 60_000).toISOString(), payload: { n: 1 }, ...extra };
}

/** Polls until `check` returns a value (the tracker writes a few hundred ms behind the status topic). */
async function eventually<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await check();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function expectError(a: Answer, http: number, code: number, name: string): void {
  expect(a.status, JSON.stringify(a.body)).toBe(http);
  expect(a.body.error).toMatchObject({ code, name });
  expect(typeof a.body.error.message).toBe('string');
}

beforeAll(async () => {
  agent = await registerProducer('http-producer');
  redis = createRedis(stack.redisUrl, silentLogger);
  kafkaProducer = kafka.producer();
  await kafkaProducer.connect();
  [pending, dlq] = await Promise.all([
    new TopicTap<Record<string, unknown>>(kafka, 'reach.pending.v1', registry).open(),
    new TopicTap<Record<string, unknown>>(kafka, 'reach.dlq.v1', registry).open(),
  ]);
});

afterAll(async () => {
  await Promise.all([pending?.close(), dlq?.close(), kafkaProducer?.disconnect(), redis?.quit()]);
});

describe('POST /v1/messages', () => {
  it('accepts a message with 202 PENDING, forwards it to reach.pending.v1, and shows it with its timeline', async () => {
    const traceparent = `00-${'ab'.repeat(16)}-${'cd'.repeat(8)}-01`;
    const sent = await call('POST', '/v1/messages', {
      body: parked({ message_type: 'task_request', tags: ['it'], priority: 'HIGH' }),
      headers: { traceparent },
    });
    expect(sent.status, JSON.stringify(sent.body)).toBe(202);
    expect(sent.body).toEqual({ message_id: expect.stringMatching(/^msg_[0-9A-HJKMNP-TV-Z]{26}$/), status: 'PENDING' });
    const id = sent.body.message_id as string;

    const onPending = await pending.waitFor((r) => r.value?.message_id === id);
    expect(onPending.value).toMatchObject({ producer: agent.agentId, priority: 'HIGH', trace_id: 'ab'.repeat(16) });
    expect(JSON.parse(Buffer.from(onPending.value!.payload as Buffer).toString())).toEqual({ n: 1 });
    expect(onPending.key).toBe(id);
    expect(onPending.headers.traceparent).toBe(traceparent);

    // Right away (answered by ingress until the tracker has it), and then from the read model.
    const now = await call('GET', `/v1/messages/${id}`);
    expect(now.status).toBe(200);
    expect(now.body).toMatchObject({ message_id: id, status: 'PENDING' });

    const timeline = await eventually('timeline with the router step', async () => {
      const t = await call('GET', `/v1/messages/${id}/events`);
      return t.status === 200 && t.body.events.length >= 2 ? t : undefined;
    });
    expect(timeline.body.message_id).toBe(id);
    const first = timeline.body.events[0];
    expect(first).toMatchObject({ state: 'PENDING', attempt: 0, service: 'ingress', code: null, detail: { via: 'http' } });
    expect(first.at).toMatch(RFC3339);
    for (const e of timeline.body.events)
      expect(Object.keys(e).sort()).toEqual(['agent_id', 'at', 'attempt', 'code', 'detail', 'instance', 'reason', 'service', 'state']);

    const msg = await call('GET', `/v1/messages/${id}`);
    expect(msg.body).toMatchObject({
      message_id: id,
      status: 'PENDING',
      attempt: 0,
      agent_id: null,
      trace_id: 'ab'.repeat(16),
      producer: agent.agentId,
      message_type: 'task_request',
      topic: null,
      target_agent_id: null,
      parent_message_id: null,
    });
    for (const k of [
      'message_id',
      'status',
      'attempt',
      'agent_id',
      'code',
      'name',
      'reason',
      'updated_at',
      'created_at',
      'trace_id',
      'producer',
      'message_type',
      'capability',
      'topic',
      'target_agent_id',
      'parent_message_id',
    ]) {
      expect(msg.body).toHaveProperty(k);
    }
    expect(msg.body.created_at).toMatch(RFC3339);
    expect(msg.body.updated_at).toMatch(RFC3339);
    expect(msg.body).not.toHaveProperty('result');
  });

  it('follows a rejected message to REJECTED with the code, name and reason (router: no route)', async () => {
    const sent = await call('POST', '/v1/messages', { body: { capability: uniq('nobody_serves'), payload: 'x' } });
    expect(sent.status).toBe(202);
    const id = sent.body.message_id as string;
    const msg = await eventually('REJECTED', async () => {
      const m = await call('GET', `/v1/messages/${id}`);
      return m.body.status === 'REJECTED' ? m : undefined;
    });
    expect(msg.body).toMatchObject({ code: 2001, name: 'NO_ROUTE', reason: expect.any(String) });
    const t = await call('GET', `/v1/messages/${id}/events`);
    expect(t.body.events.map((e: { state: string }) => e.state)).toEqual(['PENDING', 'REJECTED']);
  });

  it('lets the admin token submit, as producer "admin"', async () => {
    const sent = await call('POST', '/v1/messages', { token: adminToken(), body: parked() });
    expect(sent.status).toBe(202);
    const got = await pending.waitFor((r) => r.value?.message_id === sent.body.message_id);
    expect(got.value).toMatchObject({ producer: 'admin' });
  });

  it('answers 400 with 4101 for an invalid envelope, and writes no dead letter and no message for it', async () => {
    const two = await call('POST', '/v1/messages', { body: { capability: 'parse_pdf', topic: 'news', payload: {} } });
    expectError(two, 400, 4101, 'INVALID_ENVELOPE');
    expect(two.body.error.message).toMatch(/exactly one of capability, topic, target_agent_id/);
    const id = two.body.error.details.message_id as string;
    expect(id).toMatch(/^msg_/);
    // An HTTP refusal is the answer and nothing else (issue #13): once the DLQ is read to its
    // end (a refusal used to be produced before the answer), nothing is there about it.
    await dlq.readToEnd();
    expect(dlq.records.filter((r) => r.value?.message_id === id)).toEqual([]);
    expect((await call('GET', `/v1/messages/${id}`, { token: adminToken() })).status).toBe(404);
    expect(pending.records.some((r) => r.value?.message_id === id)).toBe(false);

    expectError(await call('POST', '/v1/messages', { raw: '{"capability": ', headers: { 'content-type': 'application/json' } }), 400, 4101, 'INVALID_ENVELOPE');
    expectError(await call('POST', '/v1/messages', { body: [1, 2] }), 400, 4101, 'INVALID_ENVELOPE');
    expectError(await call('POST', '/v1/messages', { body: { capability: 'c', priority: 'URGENT' } }), 400, 4101, 'INVALID_ENVELOPE');
    expectError(await call('POST', '/v1/messages?wait_ms=soon', { body: parked() }), 400, 4101, 'INVALID_ENVELOPE');
  });

  it('answers 401 with 1003 without a valid token, or when the body names another producer', async () => {
    expectError(await call('POST', '/v1/messages', { token: null, body: parked() }), 401, 1003, 'AUTH_FAILED');
    expectError(await call('POST', '/v1/messages', { token: 'rt1.garbage.token', body: parked() }), 401, 1003, 'AUTH_FAILED');
    expectError(await call('POST', '/v1/messages', { token: `${agent.token.slice(0, -3)}xyz`, body: parked() }), 401, 1003, 'AUTH_FAILED');
    const other = await call('POST', '/v1/messages', { body: parked({ producer: 'someone.else' }) });
    expectError(other, 401, 1003, 'AUTH_FAILED');
    expect(other.body.error.message).toMatch(/not the token's agent/);
  });

  it('answers 413 with 4102 for a payload over 256 KiB', async () => {
    const big = await call('POST', '/v1/messages', { body: parked({ payload: 'x'.repeat(256 * 1024 + 10) }) });
    expectError(big, 413, 4102, 'PAYLOAD_TOO_LARGE');
    // A body beyond what the server reads at all is refused the same way.
    const huge = await call('POST', '/v1/messages', { body: parked({ payload: 'x'.repeat(1100 * 1024) }) });
    expectError(huge, 413, 4102, 'PAYLOAD_TOO_LARGE');
  });
});

describe('idempotency keys', () => {
  it('answers a duplicate key with 200, the original message id and its status, and forwards the message once', async () => {
    const key = uniq('idem');
    const session = uniq('session');
    const first = await call('POST', '/v1/messages', { body: parked({ session_id: session }), headers: { 'idempotency-key': key } });
    expect(first.status).toBe(202);
    const again = await call('POST', '/v1/messages', { body: parked({ session_id: session }), headers: { 'idempotency-key': key } });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ message_id: first.body.message_id, status: expect.stringMatching(/^(PENDING|ROUTED|DELIVERING|DELIVERED|REJECTED|DEAD)$/) });
    // The key may also come as a body field.
    const asField = await call('POST', '/v1/messages', { body: parked({ session_id: session, idempotency_key: key }) });
    expect(asField.status).toBe(200);
    expect(asField.body.message_id).toBe(first.body.message_id);

    // A sentinel of the same session (one partition, produced in order): once it is through,
    // any forwarded duplicate would be on reach.pending.v1 before it.
    const sentinel = await call('POST', '/v1/messages', { body: parked({ session_id: session }) });
    await pending.waitFor((r) => r.value?.message_id === sentinel.body.message_id);
    const forwarded = pending.records.filter((r) => r.value?.session_id === session && r.value.message_id !== sentinel.body.message_id);
    expect(forwarded.map((r) => r.value!.message_id)).toEqual([first.body.message_id]);
    expect(forwarded[0]!.key).toBe(session);
  });

  it('keys are per producer: another producer may use the same key', async () => {
    const key = uniq('idem');
    const other = await registerProducer('http-other');
    const a = await call('POST', '/v1/messages', { body: parked(), headers: { 'idempotency-key': key } });
    const b = await call('POST', '/v1/messages', { token: other.token, body: parked(), headers: { 'idempotency-key': key } });
    expect([a.status, b.status]).toEqual([202, 202]);
    expect(a.body.message_id).not.toBe(b.body.message_id);
  });

  it('falls back to PostgreSQL when Redis lost the key, and puts the key back into Redis', async () => {
    const key = uniq('idem');
    const first = await call('POST', '/v1/messages', { body: parked(), headers: { 'idempotency-key': key } });
    expect(first.status).toBe(202);
    const redisKey = `reach:idem:${agent.agentId}:${key}`;
    expect(await redis.get(redisKey)).toBe(first.body.message_id);
    expect(await redis.del(redisKey)).toBe(1);

    const again = await call('POST', '/v1/messages', { body: parked(), headers: { 'idempotency-key': key } });
    expect(again.status).toBe(200);
    expect(again.body.message_id).toBe(first.body.message_id);
    expect(await redis.get(redisKey)).toBe(first.body.message_id);
    const ttl = await redis.ttl(redisKey);
    expect(ttl).toBeGreaterThan(0);
  });

  it('refuses an Idempotency-Key header that differs from the body field', async () => {
    const r = await call('POST', '/v1/messages', { body: parked({ idempotency_key: 'a' }), headers: { 'idempotency-key': 'b' } });
    expectError(r, 400, 4101, 'INVALID_ENVELOPE');
  });
});

describe('?wait_ms', () => {
  it('answers 504 with 3002 ACK_TIMEOUT when no handler answers in time', async () => {
    const r = await call('POST', '/v1/messages?wait_ms=1200', { body: parked() });
    expectError(r, 504, 3002, 'ACK_TIMEOUT');
    expect(r.body.error.details).toMatchObject({ message_id: expect.stringMatching(/^msg_/), status: 'PENDING' });
  });

  it('waits no longer than the message timeout_ms', async () => {
    const started = Date.now();
    const r = await call('POST', '/v1/messages?wait_ms=60000', { body: parked({ timeout_ms: 300 }) });
    expectError(r, 504, 3002, 'ACK_TIMEOUT');
    expect(Date.now() - started).toBeLessThan(30_000);
  });

  it("answers with the message's own failure when it ends REJECTED (router: 2001 → HTTP 404)", async () => {
    const r = await call('POST', '/v1/messages?wait_ms=20000', { body: { capability: uniq('nobody_serves'), payload: {} } });
    expectError(r, 404, 2001, 'NO_ROUTE');
    expect(r.body.error.details).toMatchObject({ status: 'REJECTED' });
  });

  it('answers 200 with the result once a status event carries it', async () => {
    const id = `msg_${ulid()}`;
    const waiting = call('POST', '/v1/messages?wait_ms=20000', { body: parked({ message_id: id }) });
    const accepted = await pending.waitFor((r) => r.value?.message_id === id);
    // What the dispatcher reports when the handler's result comes back (docs/pipeline.md); like
    // every stage's event it carries the message's created_at (the read model's partition key).
    const statusId = await registry.getLatestSchemaId('reach.status.v1-value');
    const result = { status: 'ok', payload: { answer: 42 } };
    const event = {
      event_id: `evt_${ulid()}`,
      message_id: id,
      state: 'DELIVERED',
      attempt: 0,
      at: Date.now(),
      service: 'it-dispatcher',
      instance: 'it',
      trace_id: null,
      producer: agent.agentId,
      message_type: 'task_request',
      capability: null,
      topic: null,
      target_agent_id: null,
      agent_id: 'it.handler',
      parent_message_id: null,
      code: null,
      reason: null,
      detail_json: JSON.stringify({ result }),
      created_at: accepted.value!.created_at as number,
      expire_at: null,
      idempotency_key: null,
      session_id: null,
      correlation_id: null,
      request_id: null,
      reply_to: null,
      priority: null,
    };
    await kafkaProducer.send({ topic: 'reach.status.v1', acks: -1, messages: [{ key: id, value: await registry.encode(statusId, event) }] });
    const r = await waiting;
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({ message_id: id, status: 'DELIVERED', result });

    // A duplicate with wait_ms gets the cached result of the original at once.
    const msg = await call('GET', `/v1/messages/${id}`);
    expect(msg.body).toMatchObject({ status: 'DELIVERED', agent_id: 'it.handler', result });
  });
});

describe('queries', () => {
  it('GET /v1/traces/{trace_id} lists every message of the trace with its timeline', async () => {
    const trace = ulid().toLowerCase().padEnd(32, '0').slice(0, 32);
    const a = await call('POST', '/v1/messages', { body: parked({ trace_id: trace }) });
    const b = await call('POST', '/v1/messages', { body: parked({ trace_id: trace }) });
    const t = await eventually('both messages in the trace', async () => {
      const r = await call('GET', `/v1/traces/${trace}`);
      // Each stage writes its own events: wait for the ingress's, not only the router's parking one.
      const recorded = (m: { events: { service: string }[] }) => m.events.some((e) => e.service === 'ingress');
      return r.status === 200 && r.body.messages.length === 2 && r.body.messages.every(recorded) ? r : undefined;
    });
    expect(t.body.trace_id).toBe(trace);
    expect(t.body.messages.map((m: { message_id: string }) => m.message_id).sort()).toEqual([a.body.message_id, b.body.message_id].sort());
    for (const m of t.body.messages) {
      expect(m).toMatchObject({ trace_id: trace, producer: agent.agentId });
      expect(m.events[0]).toMatchObject({ state: 'PENDING', service: 'ingress' });
      // Added fields (R-F1): per-stage durations from the timeline, and the elapsed time.
      expect(m.stages[0]).toMatchObject({ stage: 'ingest', attempt: 0, from: 'CREATED', to: 'PENDING', service: 'ingress' });
      expect(m.stages[0].duration_ms).toBeGreaterThanOrEqual(0);
      expect(m.elapsed_ms).toBeGreaterThanOrEqual(0);
    }
    // Two unrelated messages of one trace: two roots of its tree.
    expect(t.body.tree).toHaveLength(2);
    expect(t.body.tree).toEqual(
      expect.arrayContaining([a.body.message_id, b.body.message_id].map((message_id: string) => ({ message_id, link: 'root', children: [] }))),
    );
  });

  it('answers 404 NOT_FOUND for an unknown message or trace, and 401 without a token', async () => {
    const unknown = `msg_${ulid()}`;
    const m = await call('GET', `/v1/messages/${unknown}`);
    expect(m.status).toBe(404);
    expect(m.body).toEqual({ error: { code: 404, name: 'NOT_FOUND', message: expect.any(String) } });
    expect((await call('GET', `/v1/messages/${unknown}/events`)).status).toBe(404);
    expect((await call('GET', `/v1/traces/${uniq('trace')}`)).status).toBe(404);
    expectError(await call('GET', `/v1/messages/${unknown}`, { token: null }), 401, 1003, 'AUTH_FAILED');
  });
});
