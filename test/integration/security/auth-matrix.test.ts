import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { Producer } from 'kafkajs';
import { ulid } from 'ulid';
import { signToken } from '@reach/core';
import { PROXY_ROUTES } from '../../../services/console/dist/proxy.js';
import { adminToken, tokenSecret, urls } from '../../helpers/env.js';
import { testEnvelope } from '../../helpers/envelope.js';
import { plainKafka, registryClient, TopicTap } from '../../helpers/kafka.js';
import { eventually } from '../../helpers/wait.js';
import { registerProducer } from '../ingress/producer-agent.js';
import { CALLERS, routeTable, type Caller, type Fixtures } from './route-access.js';

// Issue #13 §5, the auth matrix that cannot be skipped: every HTTP route every running service
// reports at GET /v1/routes — one route table for all, so a new endpoint is walked
// automatically and fails here until route-access.ts documents its answers — plus the
// WebSocket hello and the Kafka ingress, each for seven callers. The matrix is printed. Each
// caller speaks from its own loopback address (127.0.13.x), so the brute-force protection
// (REACH_AUTH_FAILURE_LIMIT per address) never mixes them up; the last test trips it on purpose.

const PORTS: Record<string, string> = {
  ingress: urls.ingress,
  registry: urls.registry,
  dispatcher: urls.dispatcher,
  tracker: urls.tracker,
  'dead-letter': urls.deadLetter,
  router: urls.router,
  'retry-scheduler': urls.retryScheduler,
  console: `http://127.0.0.1:${Number(process.env.REACH_CONSOLE_PORT || 7420)}`,
};
const ADDRESS: Record<Caller, string> = Object.fromEntries(CALLERS.map((c, i) => [c, `127.0.13.${i + 1}`])) as Record<Caller, string>;
const LIMIT = Number(process.env.REACH_AUTH_FAILURE_LIMIT || 100);

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP request from a chosen local address (fetch cannot pick one). */
function send(base: string, method: string, path: string, from: string, token: string | undefined, body?: unknown): Promise<Answer> {
  const url = new URL(path, base);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  // The A2A routes answer only the protocol version they speak (docs/a2a.md); the others ignore it.
  const headers: Record<string, string> = { 'a2a-version': '1.0' };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  if (payload !== undefined) headers['content-type'] = 'application/json';
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path: url.pathname + url.search, method, headers, localAddress: from, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
}

function fill(path: string, params: Record<string, string> = {}): string {
  return path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const v = params[name];
    if (v === undefined) throw new Error(`no value for {${name}} of ${path}`);
    return encodeURIComponent(v);
  });
}

async function registerAgent(domain: string): Promise<{ agentId: string; token: string }> {
  const p = await registerProducer('matrix', domain);
  if (p.source !== 'registry') throw new Error('the registry did not register the agent');
  return p;
}

const adminPost = (path: string) => fetch(`${urls.registry}${path}`, { method: 'POST', headers: { authorization: `Bearer ${adminToken()}` } });

let fixtures: Fixtures;
let tokens: Record<Caller, string | undefined>;
/** An agent of the right domain that lives on after the walk (whose right agent deletes itself last). */
let live: { agentId: string; token: string };
const kafka = plainKafka();
const schemas = registryClient();
let producer: Producer;
let pending: TopicTap<Record<string, unknown>>;
let dlq: TopicTap<Record<string, unknown>>;

beforeAll(async () => {
  const domain = `matrix${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  let right: { agentId: string; token: string };
  let other: typeof right, revoked: typeof right, victim: typeof right, revokeMe: typeof right;
  [right, other, revoked, victim, revokeMe, live] = await Promise.all([
    registerAgent(domain),
    registerAgent(`${domain}-other`),
    registerAgent(domain),
    registerAgent(domain),
    registerAgent(domain),
    registerAgent(domain),
  ]);
  expect((await adminPost(`/v1/agents/${encodeURIComponent(revoked.agentId)}/tokens/revoke`)).status).toBe(200);
  const now = Math.floor(Date.now() / 1000);
  tokens = {
    none: undefined,
    malformed: 'rt1.not-a-token.at-all',
    expired: signToken({ sub: right.agentId, jti: `tok_${randomBytes(8).toString('hex')}`, iat: now - 7200, exp: now - 3600, dom: domain }, tokenSecret()),
    revoked: revoked.token,
    otherDomain: other.token,
    rightAgent: right.token,
    admin: adminToken(),
  };
  const capability = `matrix_${Date.now().toString(36)}`;
  const traceId = ulid().toLowerCase().padEnd(32, '0').slice(0, 32);
  const sent = await fetch(`${urls.ingress}/v1/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${right.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ capability, payload: {}, trace_id: traceId }),
  });
  const messageId = ((await sent.json()) as { message_id: string }).message_id;
  fixtures = {
    agentId: right.agentId,
    domain,
    messageId,
    traceId,
    victimId: victim.agentId,
    revokeId: revokeMe.agentId,
    unknownDlq: `dlq_${ulid()}`,
    unknownJti: `tok_${randomBytes(8).toString('hex')}`,
    capability,
  };
  // the message is in the read model, the revocation is seen by ingress and the registry
  await eventually('the message in the read model', async () =>
    (await send(urls.ingress, 'GET', `/v1/messages/${messageId}`, '127.0.0.1', adminToken())).status === 200 ? true : undefined,
  );
  await eventually('the revocation everywhere', async () => {
    const a = await send(urls.ingress, 'GET', `/v1/messages/${messageId}`, '127.0.0.1', revoked.token);
    const b = await send(urls.registry, 'GET', '/v1/agents', '127.0.0.1', revoked.token);
    return a.status === 401 && b.status === 401 ? true : undefined;
  });
  producer = kafka.producer();
  await producer.connect();
  [pending, dlq] = await Promise.all([
    new TopicTap<Record<string, unknown>>(kafka, 'reach.pending.v1', schemas).open(),
    new TopicTap<Record<string, unknown>>(kafka, 'reach.dlq.v1', schemas).open(),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([pending?.close(), dlq?.close(), producer?.disconnect()]);
});

function printMatrix(title: string, rows: Array<{ name: string; got: Record<Caller, string | number> }>): void {
  const width = Math.max(...rows.map((r) => r.name.length), title.length);
  const head = [title.padEnd(width), ...CALLERS.map((c) => c.padStart(11))].join(' ');
  const lines = rows.map((r) => [r.name.padEnd(width), ...CALLERS.map((c) => String(r.got[c]).padStart(11))].join(' '));
  process.stdout.write(`\n${head}\n${lines.join('\n')}\n`);
}

describe('the auth matrix', () => {
  it('every HTTP route of every service answers each caller as documented', async () => {
    const table = routeTable(PROXY_ROUTES);
    // One route table: what the services serve, against what route-access.ts documents.
    const served: string[] = [];
    for (const [service, base] of Object.entries(PORTS)) {
      const res = await send(base, 'GET', '/v1/routes', '127.0.0.1', undefined);
      expect({ service, status: res.status }).toEqual({ service, status: 200 });
      for (const r of (JSON.parse(res.body) as { routes: Array<{ method: string; path: string }> }).routes) served.push(`${service} ${r.method} ${r.path}`);
    }
    const documented = table.map((r) => `${r.service} ${r.method} ${r.path}`);
    expect({ undocumented: served.filter((s) => !documented.includes(s)) }).toEqual({ undocumented: [] });
    expect({ notServed: documented.filter((d) => !served.includes(d)) }).toEqual({ notServed: [] });

    const rows: Array<{ name: string; got: Record<Caller, number> }> = [];
    const wrong: string[] = [];
    for (const spec of table) {
      const got = {} as Record<Caller, number>;
      for (const caller of CALLERS) {
        const { params, body } = spec.request?.(fixtures, caller) ?? {};
        const res = await send(PORTS[spec.service]!, spec.method, fill(spec.path, params), ADDRESS[caller], tokens[caller], body);
        got[caller] = res.status;
        if (res.status !== spec.expect[caller])
          wrong.push(`${spec.service} ${spec.method} ${spec.path} as ${caller}: ${res.status}, documented ${spec.expect[caller]} (${res.body.slice(0, 160)})`);
        // a refusal always carries the 1003 body, never the resource
        if (res.status === 401 || res.status === 403) expect(JSON.parse(res.body)).toMatchObject({ error: { code: 1003, name: 'AUTH_FAILED' } });
      }
      rows.push({ name: `${spec.service} ${spec.method} ${spec.path}`, got });
    }
    printMatrix('HTTP route', rows);
    expect(wrong).toEqual([]);
  });

  it("an agent listing shows the caller's own domain, never another one's agents", async () => {
    const listed = async (caller: Caller) => {
      const res = await send(urls.registry, 'GET', '/v1/agents', ADDRESS[caller], caller === 'rightAgent' ? live.token : tokens[caller]);
      expect(res.status).toBe(200);
      return (JSON.parse(res.body) as { agents: Array<{ agent_id: string }> }).agents.map((a) => a.agent_id);
    };
    expect(await listed('admin')).toContain(live.agentId);
    expect(await listed('rightAgent')).toContain(live.agentId);
    expect(await listed('otherDomain')).not.toContain(live.agentId);
  });

  // The right agent of the walk deleted itself last; from here on it is `live`, of the same domain.
  it('the WebSocket hello (as the right agent) is welcomed only with its own token', async () => {
    const outcome = (caller: Caller): Promise<string> =>
      new Promise((resolve, reject) => {
        const ws = new WebSocket(urls.ws, { localAddress: ADDRESS[caller] });
        const token = caller === 'rightAgent' ? live.token : tokens[caller];
        ws.on('open', () => ws.send(JSON.stringify({ type: 'hello', agent_id: live.agentId, ...(token ? { token } : {}) })));
        ws.on('message', (data: Buffer) => {
          const frame = JSON.parse(data.toString()) as { type: string };
          if (frame.type === 'welcome') {
            resolve('welcome');
            ws.close();
          }
        });
        ws.on('close', (code) => resolve(String(code)));
        ws.on('error', reject);
      });
    const got = {} as Record<Caller, string>;
    for (const caller of CALLERS) got[caller] = await outcome(caller);
    printMatrix('WebSocket hello', [{ name: 'dispatcher /v1/connect hello', got }]);
    expect(got).toEqual({ none: '4003', malformed: '4003', expired: '4003', revoked: '4003', otherDomain: '4003', rightAgent: 'welcome', admin: '4003' });
  });

  it('the Kafka ingress accepts a record only from its producer (or the admin) and dead-letters the rest with 1003', async () => {
    const envelopeId = await schemas.getLatestSchemaId('reach.ingress.v1-value');
    const sent = {} as Record<Caller, string>;
    const messages = await Promise.all(
      CALLERS.map(async (caller) => {
        const id = `msg_${ulid()}`;
        sent[caller] = id;
        const env = testEnvelope({ message_id: id, capability: fixtures.capability, producer: live.agentId, payload: Buffer.from('{}') });
        const token = caller === 'rightAgent' ? live.token : tokens[caller];
        return { key: id, value: await schemas.encode(envelopeId, env), headers: token ? { 'reach-token': token } : {} };
      }),
    );
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages });
    const got = {} as Record<Caller, string>;
    for (const caller of CALLERS) {
      const id = sent[caller];
      const about = (r: { value?: Record<string, unknown> }) => r.value?.message_id === id;
      const hit = await Promise.any([pending.waitFor(about).then(() => 'accepted'), dlq.waitFor(about).then((r) => String(r.value?.code))]);
      got[caller] = hit;
    }
    printMatrix('Kafka ingress record', [{ name: 'reach.ingress.v1 (producer = right agent)', got }]);
    expect(got).toEqual({ none: '1003', malformed: '1003', expired: '1003', revoked: '1003', otherDomain: '1003', rightAgent: 'accepted', admin: 'accepted' });
  });
});

describe('brute-force protection', () => {
  it('answers 429 4129 with Retry-After to an address past REACH_AUTH_FAILURE_LIMIT failed authentications, on HTTP and the WebSocket', async () => {
    const guesser = `127.0.14.${1 + Math.floor(Math.random() * 250)}`;
    const bystander = `127.0.15.${1 + Math.floor(Math.random() * 250)}`;
    const path = `/v1/agents/${encodeURIComponent(fixtures.agentId)}/deliveries`;
    for (let i = 0; i < LIMIT; i++) {
      const res = await send(urls.dispatcher, 'GET', path, guesser, `guess-${i}-${randomBytes(8).toString('hex')}`);
      expect(res.status).toBe(401);
    }
    const blocked = await send(urls.dispatcher, 'GET', path, guesser, 'one-more-guess');
    expect(blocked.status).toBe(429);
    const retryAfter = Number(blocked.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(JSON.parse(blocked.body)).toMatchObject({
      error: { code: 4129, name: 'RATE_LIMITED', details: { reason: 'auth_failures', retry_after_s: retryAfter } },
    });
    // even the right credential is refused from that address: a guess that hits must not be told apart
    expect((await send(urls.dispatcher, 'GET', path, guesser, adminToken())).status).toBe(429);
    // probes still answer, and other addresses are not affected
    expect((await send(urls.dispatcher, 'GET', '/healthz', guesser, undefined)).status).toBe(200);
    expect((await send(urls.dispatcher, 'GET', path, bystander, adminToken())).status).toBe(200);
    // the WebSocket endpoint of the same service shares the budget: refused before the handshake
    const upgrade = await new Promise<number>((resolve, reject) => {
      const ws = new WebSocket(urls.ws, { localAddress: guesser });
      ws.on('unexpected-response', (_req, res) => {
        resolve(res.statusCode ?? 0);
        res.resume();
      });
      ws.on('open', () => reject(new Error('the handshake was accepted')));
      ws.on('error', () => undefined);
    });
    expect(upgrade).toBe(429);
  });

  it('does not count a valid token naming another producer as a failed authentication: 401 each time, never 429', async () => {
    // A client's bad bodies are not guesses at a credential: counted, they locked the client's
    // whole address out (`pnpm fuzz`: 32,914 of 55,000 submissions answered 429).
    const client = `127.0.16.${1 + Math.floor(Math.random() * 250)}`;
    const body = { capability: fixtures.capability, payload: {}, producer: 'someone-else' };
    // An agent of its own: the matrix's right agent deleted itself (and so revoked its token) at
    // the end of the walk, and ingress may already know that.
    const { token } = await registerAgent('default');
    for (let i = 0; i < LIMIT + 5; i++) {
      const res = await send(urls.ingress, 'POST', '/v1/messages', client, token, body);
      expect(res.status).toBe(401);
      expect(JSON.parse(res.body)).toMatchObject({ error: { code: 1003, details: { field: 'producer' } } });
    }
    const ok = await send(urls.ingress, 'POST', '/v1/messages', client, token, { capability: fixtures.capability, payload: {} });
    expect(ok.status).toBe(202);
  });
});
