import { afterEach, describe, expect, it } from 'vitest';
import { startTestAgent, stopTestAgents, uniqueName } from '@reach/sdk/testing';
import { adminToken, urls } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';

// Security domains in routing (R-A8): a message crosses from its producer's domain into
// an agent's domain only under a grant from the registry (PUT /v1/grants → reach.grants.v1 →
// every router's view). Real registry, router, dispatcher and SDK agents; unique domains.
const admin = { authorization: `Bearer ${adminToken()}`, 'content-type': 'application/json' };
const name = (what: string) => uniqueName(what).replace(/-/g, '_');

interface Status {
  status: string;
  code: number | null;
  agent_id: string | null;
}

async function registerProducer(domain: string): Promise<{ agent_id: string; token: string }> {
  const res = await fetch(`${urls.registry}/v1/agents`, {
    method: 'POST',
    headers: admin,
    body: JSON.stringify({ agent_type: name('dom_producer'), capabilities: [], metadata: { max_concurrency: 1, domain } }),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as { agent_id: string; token: string };
}

async function send(token: string, capability: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(`${urls.ingress}/v1/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ capability, message_type: 'task_request', headers, payload: { hello: 'domain' } }),
  });
  expect(res.status).toBe(202);
  return ((await res.json()) as { message_id: string }).message_id;
}

const final = (id: string) =>
  eventually(`${id} final`, async () => {
    const res = await fetch(`${urls.ingress}/v1/messages/${id}`, { headers: admin });
    const s = res.ok ? ((await res.json()) as Status) : undefined;
    return s && ['DELIVERED', 'REJECTED', 'DEAD'].includes(s.status) ? s : undefined;
  });

const routerHasGrant = (grantId: string, present: boolean) =>
  eventually(`router view ${present ? 'has' : 'lost'} grant ${grantId}`, async () => {
    const res = await fetch(`${urls.router}/v1/view/grants`, { headers: admin });
    const { grants } = (await res.json()) as { grants: Array<{ grant_id: string }> };
    return grants.some((g) => g.grant_id === grantId) === present;
  });

async function putGrant(body: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${urls.registry}/v1/grants`, { method: 'PUT', headers: admin, body: JSON.stringify(body) });
  expect([200, 201]).toContain(res.status);
  return ((await res.json()) as { grant_id: string }).grant_id;
}

afterEach(stopTestAgents);

describe('security domains in routing', () => {
  it('refuses delivery across domains with 2003 until a grant allows it, and again once the grant is revoked', async () => {
    const [sales, ops] = [name('sales'), name('ops')];
    const cap = name('dom_cap');
    const worker = await startTestAgent({ descriptor: { metadata: { max_concurrency: 4, domain: ops } }, handlers: { [cap]: async () => 'ok' } });
    const producer = await registerProducer(sales);

    const denied = await final(await send(producer.token, cap));
    expect(denied).toMatchObject({ status: 'REJECTED', code: 2003 });
    expect(worker.received).toHaveLength(0);

    // A grant for another capability of the same pair does not open this one.
    await routerHasGrant(await putGrant({ from_domain: sales, to_domain: ops, capability: name('other') }), true);
    expect(await final(await send(producer.token, cap))).toMatchObject({ status: 'REJECTED', code: 2003 });

    const grantId = await putGrant({ from_domain: sales, to_domain: ops, capability: cap });
    await routerHasGrant(grantId, true);
    expect(await final(await send(producer.token, cap))).toMatchObject({ status: 'DELIVERED', agent_id: worker.agentId });

    const del = await fetch(`${urls.registry}/v1/grants/${encodeURIComponent(grantId)}`, { method: 'DELETE', headers: admin });
    expect(del.status).toBe(200);
    await routerHasGrant(grantId, false);
    expect(await final(await send(producer.token, cap))).toMatchObject({ status: 'REJECTED', code: 2003 });
  });

  it("a producer cannot claim another domain: ingress overwrites reach-producer-domain with its token's domain", async () => {
    const [mine, theirs] = [name('dom_mine'), name('dom_theirs')];
    const cap = name('dom_forge');
    const worker = await startTestAgent({ descriptor: { metadata: { max_concurrency: 4, domain: theirs } }, handlers: { [cap]: async () => 'ok' } });
    const producer = await registerProducer(mine);
    const id = await send(producer.token, cap, { 'reach-producer-domain': theirs });
    expect(await final(id)).toMatchObject({ status: 'REJECTED', code: 2003 });
    expect(worker.received).toHaveLength(0);
  });

  it('a grant is one-way: the reverse direction stays closed', async () => {
    const [a, b] = [name('dom_a'), name('dom_b')];
    const cap = name('dom_oneway');
    await startTestAgent({ descriptor: { metadata: { max_concurrency: 4, domain: a } }, handlers: { [cap]: async () => 'ok' } });
    await routerHasGrant(await putGrant({ from_domain: a, to_domain: b }), true);
    const fromB = await registerProducer(b);
    expect(await final(await send(fromB.token, cap))).toMatchObject({ status: 'REJECTED', code: 2003 });
  });

  it('only candidates in reachable domains are chosen when several domains offer the capability', async () => {
    const [home, away] = [name('dom_home'), name('dom_away')];
    const cap = name('dom_mixed');
    const near = await startTestAgent({ descriptor: { metadata: { max_concurrency: 4, domain: home } }, handlers: { [cap]: async () => 'ok' } });
    const far = await startTestAgent({ descriptor: { metadata: { max_concurrency: 4, domain: away } }, handlers: { [cap]: async () => 'ok' } });
    const producer = await registerProducer(home);
    const ids = [];
    for (let i = 0; i < 6; i++) ids.push(await send(producer.token, cap));
    for (const id of ids) expect(await final(id)).toMatchObject({ status: 'DELIVERED', agent_id: near.agentId });
    expect(far.received).toHaveLength(0);
  });

  it('the answer to a granted request travels back to the requester across the domain boundary', async () => {
    const [front, back] = [name('dom_front'), name('dom_back')];
    const cap = name('dom_reply');
    await startTestAgent({ descriptor: { metadata: { max_concurrency: 4, domain: back } }, handlers: { [cap]: async (m) => ({ echo: m.payload }) } });
    const requester = await startTestAgent({ descriptor: { metadata: { max_concurrency: 4, domain: front } } });
    await routerHasGrant(await putGrant({ from_domain: front, to_domain: back, capability: cap }), true);
    // The requester's pre-flight view (its dispatcher's routes frames) follows the grant a moment
    // after the routers: until then request() would fail fast with 2003 from the older view.
    await eventually('the requester’s pre-flight view to allow it', () => requester.node.canReach(cap), 10_000);
    const answer = await requester.node.request(cap, { q: 1 }, { timeoutMs: 15_000 });
    expect(answer).toEqual({ echo: { q: 1 } });
  });
});
