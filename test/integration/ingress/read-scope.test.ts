import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { startTestAgent, stopTestAgents, type TestAgent } from '@reach/sdk/testing';
import { adminToken, uniq, urls } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';
import { registerProducer } from './producer-agent.js';

// Issue #13, reads are scoped: a message, its timeline, its trace and its ?wait_ms result are
// visible to the admin, its producer and the agent that handled it (or was targeted), and to
// nobody else: another agent, of this domain or another, gets 404 exactly as for an unknown id
// (REACH_READS_SAME_DOMAIN is off on the test stack; its rule is unit-tested in read-access).

interface Answer {
  status: number;
  // Response bodies are read field by field in assertions; their shapes are what is under test.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

async function call(method: string, path: string, token: string, body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${urls.ingress}${path}`, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** A producer registered in `domain`, with the token the registry issued it. */
async function producerIn(domain: string): Promise<{ agentId: string; token: string }> {
  const p = await registerProducer('reader', domain);
  expect(p.source).toBe('registry');
  return p;
}

const domain = `scope${Date.now().toString(36)}`;
const capability = `read_${Date.now().toString(36)}`;
let handler: TestAgent;
let producer: { agentId: string; token: string };
let sameDomain: { agentId: string; token: string };
let otherDomain: { agentId: string; token: string };
let messageId: string;
let traceId: string;

beforeAll(async () => {
  handler = await startTestAgent({ handlers: { [capability]: async () => ({ done: true }) }, descriptor: { metadata: { domain } } as never });
  [producer, sameDomain, otherDomain] = await Promise.all([producerIn(domain), producerIn(domain), producerIn(`${domain}x`)]);
  traceId = ulid().toLowerCase().padEnd(32, '0').slice(0, 32);
  const sent = await call('POST', '/v1/messages?wait_ms=15000', producer.token, { capability, payload: { n: 1 }, trace_id: traceId });
  expect(sent.status).toBe(200);
  expect(sent.body).toMatchObject({ status: 'DELIVERED', result: { status: 'ok', payload: { done: true } } });
  messageId = sent.body.message_id as string;
  // the tracker has written the whole timeline
  await eventually('the DELIVERED timeline', async () => {
    const t = await call('GET', `/v1/messages/${messageId}/events`, adminToken());
    return t.status === 200 && t.body.events.some((e: { state: string }) => e.state === 'DELIVERED') ? t : undefined;
  });
}, 60_000);

afterAll(async () => {
  await stopTestAgents();
});

describe('scoped reads of a message', () => {
  const paths = () => [`/v1/messages/${messageId}`, `/v1/messages/${messageId}/events`, `/v1/traces/${traceId}`];

  it('answers the admin, the producer and the agent that handled it', async () => {
    for (const token of [adminToken(), producer.token, handler.node.token!]) {
      for (const path of paths()) expect({ path, status: (await call('GET', path, token)).status }).toEqual({ path, status: 200 });
    }
    const asHandler = await call('GET', `/v1/messages/${messageId}`, handler.node.token!);
    expect(asHandler.body).toMatchObject({ message_id: messageId, agent_id: handler.agentId, producer: producer.agentId, result: { payload: { done: true } } });
  });

  it('answers 404 NOT_FOUND to an agent of another domain and to a bystander of the same domain, as for an unknown id', async () => {
    const unknown = await call('GET', `/v1/messages/msg_${ulid()}`, otherDomain.token);
    for (const token of [otherDomain.token, sameDomain.token]) {
      for (const path of paths()) {
        const a = await call('GET', path, token);
        expect({ path, status: a.status }).toEqual({ path, status: 404 });
        expect(a.body.error).toMatchObject({ code: 404, name: 'NOT_FOUND' });
      }
    }
    const hidden = await call('GET', `/v1/messages/${messageId}`, otherDomain.token);
    expect(Object.keys(hidden.body.error).sort()).toEqual(Object.keys(unknown.body.error).sort());
  });

  it('lists only the messages of a trace the caller may read', async () => {
    // The bystander adds its own message to the same trace: it sees that one only.
    const own = await call('POST', '/v1/messages', sameDomain.token, { capability: uniq('nobody_reads'), payload: {}, trace_id: traceId });
    expect(own.status).toBe(202);
    const mine = await eventually('the bystander sees its own message of the trace', async () => {
      const t = await call('GET', `/v1/traces/${traceId}`, sameDomain.token);
      return t.status === 200 ? t : undefined;
    });
    // its own message (and the NO_ROUTE receipt addressed to it, once there), never the other one
    const ids = (t: Answer) => t.body.messages.map((m: { message_id: string }) => m.message_id) as string[];
    expect(ids(mine)).toContain(own.body.message_id);
    expect(ids(mine)).not.toContain(messageId);
    expect(ids(await call('GET', `/v1/traces/${traceId}`, sameDomain.token))).not.toContain(messageId);
    const all = await call('GET', `/v1/traces/${traceId}`, adminToken());
    expect(ids(all)).toEqual(expect.arrayContaining([messageId, own.body.message_id]));
  });
});
