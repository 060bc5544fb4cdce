import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { ulid } from 'ulid';
import { signToken } from '@reach/core';
import { createPgPool, type Pool } from '@reach/store';
import { adminToken, stack, tokenSecret, uniq, urls } from '../../helpers/env.js';
import { plainKafka, registryClient, TopicTap, statusTap } from '../../helpers/kafka.js';
import { testEnvelope } from '../../helpers/envelope.js';
import { eventually } from '../../helpers/wait.js';
import { TestAgent, type Frame } from '../dispatcher/harness.js';
import { call, register, type Registered } from './helpers.js';

// R-C2 / issue 5 point 4: a revoked or expired agent token is refused on all three paths —
// HTTP (ingress 401, 1003), WebSocket (dispatcher 4003, also an already open connection) and
// Kafka ingress (DLQ INVALID 1003, REJECTED status, receipt) — and by the registry itself; the
// admin revokes every token of an agent (POST /v1/agents/{id}/tokens/revoke), one token
// (DELETE /v1/tokens/{jti}), or implicitly by deleting the agent. Admin endpoints refuse an
// agent token with 403.
const admin = adminToken();
const kafka = plainKafka();
const schemas = registryClient();
let producer: Producer;
let dlq: TopicTap<Record<string, unknown>>;
let pending: TopicTap<Record<string, unknown>>;
let status: TopicTap<Record<string, unknown>>;
let envelopeSchemaId: number;
let pg: Pool;
const mintedJtis: string[] = [];

beforeAll(async () => {
  pg = createPgPool(stack.databaseUrl);
  envelopeSchemaId = await schemas.getLatestSchemaId('reach.ingress.v1-value');
  producer = kafka.producer();
  await producer.connect();
  [dlq, pending, status] = await Promise.all([
    new TopicTap<Record<string, unknown>>(kafka, 'reach.dlq.v1', schemas).open(),
    new TopicTap<Record<string, unknown>>(kafka, 'reach.pending.v1', schemas).open(),
    statusTap<Record<string, unknown>>(kafka, schemas).open(),
  ]);
});

afterAll(async () => {
  if (mintedJtis.length > 0) await pg.query('DELETE FROM revoked_tokens WHERE jti = ANY($1)', [mintedJtis]);
  await Promise.all([dlq?.close(), pending?.close(), status?.close(), producer?.disconnect(), pg?.end()]);
});

function claimsOf(token: string): { sub: string; jti: string; exp: number } {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { sub: string; jti: string; exp: number };
}

/** A producer agent registered by the admin, with its own token. */
function registerAgent(prefix: string): Promise<Registered> {
  return register({ agent_id: uniq(`it.${prefix}`), agent_type: 'it.tokens', capabilities: [] });
}

/** ingress's answer to a harmless authenticated read: 401 once it refuses the token, 404 while it still accepts it. */
async function ingressRead(token: string): Promise<number> {
  const res = await fetch(`${urls.ingress}/v1/messages/msg_${ulid()}`, { headers: { authorization: `Bearer ${token}` } });
  return res.status;
}

async function postMessage(token: string, producer?: string): Promise<{ status: number; body: { error?: { code: number; name: string } } }> {
  const res = await fetch(`${urls.ingress}/v1/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ capability: 'parse_tokens_test', payload: { n: 1 }, ...(producer ? { producer } : {}) }),
  });
  return { status: res.status, body: (await res.json()) as { error?: { code: number; name: string } } };
}

/** Writes an envelope to reach.ingress.v1 as an outside agent does; resolves with its message id. */
async function sendViaKafka(agentId: string, token: string): Promise<string> {
  const env = testEnvelope({ producer: agentId, capability: 'parse_tokens_test' });
  await producer.send({
    topic: 'reach.ingress.v1',
    acks: -1,
    messages: [{ key: env.message_id as string, value: await schemas.encode(envelopeSchemaId, env), headers: { 'reach-token': token } }],
  });
  return env.message_id as string;
}

/** The Kafka path refused it: DLQ INVALID 1003, REJECTED 1003, and a receipt to the token's agent. */
async function expectKafkaRefusal(messageId: string, agentId: string, reason: RegExp): Promise<void> {
  const dead = await dlq.waitFor((r) => (r.value?.envelope as { message_id?: string } | null | undefined)?.message_id === messageId);
  expect(dead.value).toMatchObject({ reason: 'INVALID', code: 1003, service: 'ingress', source_topic: 'reach.ingress.v1' });
  expect(String(dead.value!.error)).toMatch(reason);
  const st = await status.waitFor((r) => r.value?.message_id === messageId && r.value.state === 'REJECTED');
  expect(st.value).toMatchObject({ code: 1003, service: 'ingress' });
  const receipt = await pending.waitFor((r) => r.value?.message_type === 'reach.receipt' && r.value.correlation_id === messageId);
  expect(receipt.value).toMatchObject({ target_agent_id: agentId });
}

async function expectWsRefused(agentId: string, token: string): Promise<Frame> {
  const agent = await TestAgent.open();
  agent.send({ type: 'hello', agent_id: agentId, token });
  expect((await agent.closed).code).toBe(4003);
  return agent.frames[0]!;
}

describe('revoking every token of an agent (POST /v1/agents/{id}/tokens/revoke)', () => {
  it('closes its open WebSocket with 4003 and refuses the token on HTTP, WebSocket, Kafka ingress and the registry', async () => {
    const reg = await registerAgent('revoked');
    const { agent: live } = await TestAgent.connect(reg.agent_id, { token: reg.token });
    expect(await postMessage(reg.token)).toMatchObject({ status: 202 });

    const res = await call<{ agent_id: string; revoked: Array<{ jti: string }> }>('POST', `/v1/agents/${reg.agent_id}/tokens/revoke`, { token: admin });
    expect(res.status).toBe(200);
    expect(res.body.revoked.map((t) => t.jti)).toEqual([claimsOf(reg.token).jti]);

    // The open connection is closed by the dispatcher's revocation watch.
    expect((await live.closed).code).toBe(4003);
    expect(live.frames.at(-1)).toMatchObject({ type: 'error', code: 1003, name: 'AUTH_FAILED', message: expect.stringMatching(/revoked/) });
    expect(await expectWsRefused(reg.agent_id, reg.token)).toMatchObject({ type: 'error', code: 1003, message: expect.stringMatching(/revoked/) });

    await eventually('ingress to see the revocation', async () => (await ingressRead(reg.token)) === 401, 10_000);
    expect(await postMessage(reg.token)).toMatchObject({ status: 401, body: { error: { code: 1003, name: 'AUTH_FAILED' } } });
    await expectKafkaRefusal(await sendViaKafka(reg.agent_id, reg.token), reg.agent_id, /revoked/);

    // Nor can the agent keep its lease or re-register itself with it.
    expect((await call('POST', `/v1/agents/${reg.agent_id}/heartbeat`, { body: {}, token: reg.token })).status).toBe(401);
    const again = await call<{ error: { code: number } }>('POST', '/v1/agents', {
      body: { agent_id: reg.agent_id, agent_type: 'it.tokens', capabilities: [] },
      token: reg.token,
    });
    expect(again.status).toBe(401);
    expect(again.body.error.code).toBe(1003);
    // Revoking again finds nothing new.
    const twice = await call<{ revoked: unknown[] }>('POST', `/v1/agents/${reg.agent_id}/tokens/revoke`, { token: admin });
    expect(twice.body.revoked).toEqual([]);
    await call('DELETE', `/v1/agents/${reg.agent_id}`, { token: admin });
  }, 60_000);
});

describe('revoking one token (DELETE /v1/tokens/{jti})', () => {
  it('closes the connection running on it and leaves the agent its newer token', async () => {
    const first = await registerAgent('one-token');
    // Re-registering with its own token gives the agent a second token.
    const second = await register({ agent_id: first.agent_id, agent_type: 'it.tokens', capabilities: [] }, first.token);
    const { agent: live } = await TestAgent.connect(first.agent_id, { token: first.token });

    const jti = claimsOf(first.token).jti;
    const res = await call<Record<string, unknown>>('DELETE', `/v1/tokens/${jti}`, { token: admin });
    expect(res).toMatchObject({ status: 200, body: { jti, agent_id: first.agent_id, status: 'REVOKED' } });
    expect((await call('DELETE', `/v1/tokens/${jti}`, { token: admin })).status).toBe(200); // idempotent
    expect((await call('DELETE', `/v1/tokens/tok_${ulid()}`, { token: admin })).status).toBe(404);

    expect((await live.closed).code).toBe(4003);
    const { agent: fresh } = await TestAgent.connect(first.agent_id, { token: second.token });
    await eventually('ingress to see the revocation', async () => (await ingressRead(first.token)) === 401, 10_000);
    expect(await postMessage(second.token)).toMatchObject({ status: 202 });
    expect(await postMessage(first.token)).toMatchObject({ status: 401, body: { error: { code: 1003 } } });
    await fresh.close();
    await call('DELETE', `/v1/agents/${first.agent_id}`, { token: admin });
  }, 60_000);
});

describe('DELETE /v1/agents/{id}', () => {
  it('revokes the agent’s tokens: its open connection closes with 4003 and ingress refuses them', async () => {
    const reg = await registerAgent('deleted');
    const { agent: live } = await TestAgent.connect(reg.agent_id, { token: reg.token });
    expect((await call('DELETE', `/v1/agents/${reg.agent_id}`, { token: reg.token })).status).toBe(200);
    expect((await live.closed).code).toBe(4003);
    await eventually('ingress to see the revocation', async () => (await ingressRead(reg.token)) === 401, 10_000);
    expect(await postMessage(reg.token)).toMatchObject({ status: 401, body: { error: { code: 1003 } } });
  }, 60_000);
});

describe('an expired token', () => {
  it('is refused on HTTP (401 1003), WebSocket (4003), Kafka ingress (DLQ 1003) and by the registry', async () => {
    const reg = await registerAgent('expired');
    const nowS = Math.floor(Date.now() / 1000);
    const jti = `tok_${ulid()}`;
    mintedJtis.push(jti);
    const expired = signToken({ sub: reg.agent_id, jti, iat: nowS - 7200, exp: nowS - 3600, dom: 'default' }, tokenSecret());

    expect(await postMessage(expired)).toMatchObject({ status: 401, body: { error: { code: 1003, name: 'AUTH_FAILED' } } });
    expect(await expectWsRefused(reg.agent_id, expired)).toMatchObject({ type: 'error', code: 1003, message: expect.stringMatching(/expired/) });
    await expectKafkaRefusal(await sendViaKafka(reg.agent_id, expired), reg.agent_id, /expired/);
    expect((await call('POST', `/v1/agents/${reg.agent_id}/heartbeat`, { body: {}, token: expired })).status).toBe(401);
    await call('DELETE', `/v1/agents/${reg.agent_id}`, { token: admin });
  }, 60_000);

  it('closes an open connection with 4003 when it expires', async () => {
    const reg = await registerAgent('expiring');
    const nowS = Math.floor(Date.now() / 1000);
    const short = signToken({ sub: reg.agent_id, jti: `tok_${ulid()}`, iat: nowS, exp: nowS + 2, dom: 'default' }, tokenSecret());
    const { agent: live } = await TestAgent.connect(reg.agent_id, { token: short });
    expect((await live.closed).code).toBe(4003);
    expect(live.frames.at(-1)).toMatchObject({ type: 'error', code: 1003, message: expect.stringMatching(/expired/) });
    await call('DELETE', `/v1/agents/${reg.agent_id}`, { token: admin });
  }, 30_000);
});

describe('token renewal on an open connection (refresh_token)', () => {
  it('accepts a newer token of the same agent and answers token_refreshed', async () => {
    const reg = await registerAgent('renewing');
    const { agent: live, welcome } = await TestAgent.connect(reg.agent_id, { token: reg.token });
    const renewed = await register({ agent_id: reg.agent_id, agent_type: 'it.tokens', capabilities: [] }, reg.token);
    live.send({ type: 'refresh_token', token: renewed.token });
    const answer = await live.next((f) => f.type === 'token_refreshed' || f.type === 'error');
    expect(answer).toEqual({ type: 'token_refreshed', expires_at: new Date(claimsOf(renewed.token).exp * 1000).toISOString() });
    // Revoking the token the connection started with no longer concerns it. A canary revoked
    // afterwards proves the dispatcher has seen that revocation once the canary is closed.
    expect((await call('DELETE', `/v1/tokens/${claimsOf(reg.token).jti}`, { token: admin })).status).toBe(200);
    const canary = await registerAgent('canary');
    const { agent: canaryWs } = await TestAgent.connect(canary.agent_id, { token: canary.token });
    await call('POST', `/v1/agents/${canary.agent_id}/tokens/revoke`, { token: admin });
    expect((await canaryWs.closed).code).toBe(4003);
    live.send({ type: 'ping', ts: 42 });
    await live.next((f) => f.type === 'pong' && f.ts === 42);
    // Its sends now carry the renewed token: ingress accepts them although the first one is revoked.
    live.send({ type: 'send', client_ref: 'after-renewal', capability: 'parse_tokens_test', payload: { n: 2 } });
    const accepted = await live.next((f) => f.type === 'accepted' || f.type === 'error');
    expect(accepted).toMatchObject({ type: 'accepted', client_ref: 'after-renewal' });
    const first = await status.waitFor((r) => r.value?.message_id === accepted.message_id && r.value?.service === 'ingress');
    expect(first.value).toMatchObject({ state: 'PENDING' });

    await call('DELETE', `/v1/tokens/${claimsOf(renewed.token).jti}`, { token: admin });
    expect((await live.closed).code).toBe(4003);
    expect(live.frames.filter((f) => f.type === 'welcome')).toEqual([welcome]);
    for (const id of [reg.agent_id, canary.agent_id]) await call('DELETE', `/v1/agents/${id}`, { token: admin });
  }, 30_000);

  it('closes with 4003 when the new token belongs to another agent', async () => {
    const reg = await registerAgent('renewing-wrong');
    const other = await registerAgent('renewing-other');
    const { agent: live } = await TestAgent.connect(reg.agent_id, { token: reg.token });
    live.send({ type: 'refresh_token', token: other.token });
    expect((await live.closed).code).toBe(4003);
    expect(live.frames.at(-1)).toMatchObject({ type: 'error', code: 1003, message: expect.stringMatching(/belongs to agent/) });
    for (const id of [reg.agent_id, other.agent_id]) await call('DELETE', `/v1/agents/${id}`, { token: admin });
  }, 30_000);
});

describe('admin endpoints refuse agent tokens (403, code 1003)', () => {
  const registryAdmin: Array<[string, string, unknown]> = [
    ['PUT', '/v1/grants', { from_domain: 'it-a', to_domain: 'it-b' }],
    ['GET', '/v1/grants', undefined],
    ['DELETE', '/v1/grants/it-a|it-b|*', undefined],
    ['POST', '/v1/agents/it.nobody/tokens/revoke', undefined],
    ['DELETE', `/v1/tokens/tok_${ulid()}`, undefined],
  ];
  const deadLetterAdmin: Array<[string, string, unknown]> = [
    ['GET', '/v1/dlq', undefined],
    ['GET', '/v1/dlq/dlq_none', undefined],
    ['POST', '/v1/dlq/dlq_none/replay', undefined],
    ['POST', '/v1/dlq/replay', { reason: 'NO_ROUTE', dry_run: true }],
    ['DELETE', '/v1/dlq/dlq_none', undefined],
  ];

  const ingressAdmin: Array<[string, string, unknown]> = [
    ['GET', '/v1/quotas', undefined],
    ['GET', '/v1/quotas/it.nobody', undefined],
    ['PUT', '/v1/quotas/it.nobody', { rate_per_s: 5, burst: 5 }],
    ['DELETE', '/v1/quotas/it.nobody', undefined],
  ];

  it.each([
    ['registry', urls.registry, registryAdmin],
    ['dead-letter', urls.deadLetter, deadLetterAdmin],
    ['ingress (quotas)', urls.ingress, ingressAdmin],
  ] as const)('%s: 401 without a token or with garbage, 403 with a valid agent token', async (_name, base, routes) => {
    const reg = await registerAgent('not-admin');
    for (const [method, path, body] of routes) {
      const as = (token?: string) => call<{ error: { code: number; name: string } }>(method, path, { body, base, ...(token ? { token } : {}) });
      expect((await as()).status, `${method} ${path} without a token`).toBe(401);
      expect((await as('garbage-token')).status, `${method} ${path} with garbage`).toBe(401);
      const forbidden = await as(reg.token);
      expect(forbidden.status, `${method} ${path} with an agent token`).toBe(403);
      expect(forbidden.body.error).toMatchObject({ code: 1003, name: 'AUTH_FAILED' });
    }
    await call('DELETE', `/v1/agents/${reg.agent_id}`, { token: admin });
  });
});
