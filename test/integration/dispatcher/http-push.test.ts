import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { plainKafka, registryClient, TopicTap, statusTap } from '../../helpers/kafka.js';
import { agentId, messageIdOf, Router, TestAgent } from './harness.js';

// HTTP push (R-C8): an agent whose registry record has an `http` endpoint and that holds
// no WebSocket gets the deliver frame POSTed to it. 2xx = ack (a `{result}` body is a result),
// 4xx = reject, 5xx = failure (the delivery stays buffered and DELIVERING). The agent records
// are written to reach.agents.v1 here the way the registry would (OFFLINE and without
// capabilities, so no router ever picks these fake agents), and tombstoned afterwards.
const kafka = plainKafka();
const registry = registryClient();
let producer: Producer;
let router: Router;
let status: TopicTap<Record<string, unknown>>;
let ingress: TopicTap<Record<string, unknown>>;
let server: Server;
let endpoint: string;
let agentsSchemaId: number;
const fakeAgents: string[] = [];

interface Pushed {
  body: Record<string, unknown>;
  headers: IncomingMessage['headers'];
}
const pushed: Pushed[] = [];
/** How the test endpoint answers, by the `mode` in the payload. */
const answers: Record<string, { status: number; body?: unknown }> = {
  ok: { status: 204 },
  reject: { status: 422, body: { error: { code: 'NOPE', message: 'cannot do that' } } },
  fail: { status: 503, body: { error: 'down' } },
  result: { status: 200, body: { result: { status: 'ok', payload: { sum: 3 } } } },
  lone: { status: 200, body: { result: { status: 'ok', payload: { t: '\ud83d' } } } },
  big: { status: 200, body: { result: { status: 'ok', payload_b64: Buffer.alloc(256 * 1024 + 1).toString('base64') } } },
};

async function registerHttpAgent(id: string): Promise<void> {
  const now = Date.now();
  const record = {
    agent_id: id,
    agent_type: 'it-http',
    status: 'OFFLINE',
    revision: now,
    lease_id: `lease-${id}`,
    lease_expires_at: now,
    ttl_s: 60,
    endpoints: { ws: null, http: `${endpoint}/agents/${id}`, protocol_version: '1' },
    capabilities: [],
    metadata: { max_concurrency: 10, region: null, timezone: null, model: null, domain: 'default', weight: 1, extra: {} },
    load: { current_load: 0, queue_length: 0, avg_latency_ms: 0, health: 1 },
    qos: 1,
    registered_at: now,
    updated_at: now,
  };
  fakeAgents.push(id);
  await producer.send({ topic: 'reach.agents.v1', acks: -1, messages: [{ key: id, value: await registry.encode(agentsSchemaId, record) }] });
}

/**
 * The dispatcher learns endpoints from its view of reach.agents.v1, a moment after the record
 * is written: route probe deliveries until one is pushed, then the view has the agent.
 */
async function untilPushed(id: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const env = await router.route(id, router.envelope({ payload: Buffer.from(JSON.stringify({ mode: 'ok', probe: true })) }));
    const got = await waitPushed((p) => messageIdOf(p.body as never) === env.message_id, 1000).catch(() => undefined);
    if (got) return;
    if (Date.now() > deadline) throw new Error(`no push to ${id}`);
  }
}

async function waitPushed(pred: (p: Pushed) => boolean, timeoutMs = 20_000): Promise<Pushed> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const hit = pushed.find(pred);
    if (hit) return hit;
    if (Date.now() > deadline) throw new Error(`no matching push within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>;
      pushed.push({ body, headers: req.headers });
      const mode = ((body.message as { payload?: { mode?: string } }).payload?.mode ?? 'ok') as string;
      const a = answers[mode] ?? answers.ok!;
      res.writeHead(a.status, { 'content-type': 'application/json' });
      res.end(a.body === undefined ? '' : JSON.stringify(a.body));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  producer = kafka.producer();
  await producer.connect();
  router = await new Router(producer, registry).init();
  agentsSchemaId = await registry.getLatestSchemaId('reach.agents.v1-value');
  [status, ingress] = await Promise.all([
    statusTap<Record<string, unknown>>(kafka, registry).open(),
    new TopicTap<Record<string, unknown>>(kafka, 'reach.ingress.v1', registry).open(),
  ]);
});

afterAll(async () => {
  if (producer && fakeAgents.length > 0) {
    await producer.send({ topic: 'reach.agents.v1', acks: -1, messages: fakeAgents.map((id) => ({ key: id, value: null })) });
  }
  await Promise.all([status?.close(), ingress?.close(), producer?.disconnect()]);
  await new Promise<void>((r) => server?.close(() => r()));
});

function route(id: string, mode: string, extra: Record<string, unknown> = {}) {
  return router.route(id, router.envelope({ payload: Buffer.from(JSON.stringify({ mode })), ...extra }));
}

describe('dispatcher: HTTP push', () => {
  it('POSTs the deliver frame to the agent endpoint; 2xx → DELIVERED', async () => {
    const id = agentId('it.http');
    await registerHttpAgent(id);
    await untilPushed(id);
    const env = await route(id, 'ok');
    const p = await waitPushed((x) => messageIdOf(x.body as never) === env.message_id);
    expect(p.body).toMatchObject({
      type: 'deliver',
      attempt: 0,
      deadline: expect.any(String),
      message: { message_id: env.message_id, payload: { mode: 'ok' } },
    });
    expect(p.headers['content-type']).toBe('application/json');
    expect(p.headers['reach-agent-id']).toBe(id);
    const delivered = await status.waitFor((r) => r.value?.message_id === env.message_id && r.value?.state === 'DELIVERED');
    expect(delivered.value).toMatchObject({ agent_id: id, service: 'dispatcher' });
  });

  it('4xx → REJECTED 3003 with the agent error kept', async () => {
    const id = agentId('it.http');
    await registerHttpAgent(id);
    await untilPushed(id);
    const env = await route(id, 'reject');
    const rejected = await status.waitFor((r) => r.value?.message_id === env.message_id && r.value?.state === 'REJECTED');
    expect(rejected.value).toMatchObject({ code: 3003, reason: 'cannot do that', agent_id: id });
    expect(JSON.parse(rejected.value!.detail_json as string)).toMatchObject({ agent_code: 'NOPE', agent_reason: 'cannot do that' });
  });

  it('a 2xx {result} body is the result: DELIVERED with it, and the correlated reply to reply_to', async () => {
    const id = agentId('it.http');
    const requester = agentId('it.requester');
    await registerHttpAgent(id);
    await untilPushed(id);
    const env = await route(id, 'result', { reply_to: requester });
    const st = await status.waitFor((r) => r.value?.message_id === env.message_id && r.value?.state === 'DELIVERED');
    expect(JSON.parse(st.value!.detail_json as string)).toEqual({ result: { status: 'ok', payload: { sum: 3 } } });
    const reply = await ingress.waitFor((r) => r.value?.correlation_id === env.message_id);
    expect(reply.value).toMatchObject({ message_type: 'task_result', target_agent_id: requester, producer: id, trace_id: env.trace_id });
    expect(reply.headers['reach-token']).toMatch(/^rt1\./);
  });

  it('a {result} the pipeline cannot carry is refused like over a WebSocket: REJECTED 3003, the agent code 4101 / 4102', async () => {
    const id = agentId('it.http');
    await registerHttpAgent(id);
    await untilPushed(id);
    for (const [mode, code] of [
      ['lone', 4101],
      ['big', 4102],
    ] as const) {
      const env = await route(id, mode);
      const rejected = await status.waitFor((r) => r.value?.message_id === env.message_id && r.value?.state === 'REJECTED');
      expect(rejected.value, mode).toMatchObject({ code: 3003, agent_id: id });
      expect(JSON.parse(rejected.value!.detail_json as string), mode).toMatchObject({ agent_code: code, retryable: false });
    }
  });

  it('5xx → stays DELIVERING and buffered: the agent gets it when it connects over WebSocket', async () => {
    const id = agentId('it.http');
    await registerHttpAgent(id);
    await untilPushed(id);
    const env = await route(id, 'fail');
    await waitPushed((x) => messageIdOf(x.body as never) === env.message_id);
    const { agent } = await TestAgent.connect(id);
    const d = await agent.next((f) => f.type === 'deliver' && messageIdOf(f) === env.message_id);
    agent.send({ type: 'ack', seq: d.seq, message_id: env.message_id });
    await status.waitFor((r) => r.value?.message_id === env.message_id && r.value?.state === 'DELIVERED');
    // While the WebSocket is up, nothing is pushed over HTTP.
    const live = await route(id, 'ok');
    const overWs = await agent.next((f) => f.type === 'deliver' && messageIdOf(f) === live.message_id);
    expect(overWs.seq).toBeGreaterThan(d.seq as number);
    expect(pushed.some((x) => messageIdOf(x.body as never) === live.message_id)).toBe(false);
    await agent.close();
  });
});
