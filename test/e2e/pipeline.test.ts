import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { NonRetryableError, newMessageId } from '@reach/core';
import { startTestAgent, stopTestAgents, testClient, uniqueName } from '@reach/sdk/testing';
import { adminToken, urls } from '../helpers/env.js';
import { plainKafka, registryClient } from '../helpers/kafka.js';
import { eventually } from '../helpers/wait.js';
import { testEnvelope } from '../helpers/envelope.js';

// The whole pipeline, end to end, against the running stack: outside clients (a plain kafkajs
// producer, HTTP) → ingress → router → dispatcher → SDK agents on WebSockets → acks/results →
// tracker → GET /v1/messages/{id} with the timeline of every hop.
const client = testClient();
const cap = (what: string) => uniqueName(`e2e_${what}`).replace(/-/g, '_');
let producer: Producer;

interface Status {
  message_id: string;
  status: string;
  code?: number | null;
  agent_id?: string | null;
}
interface Timeline {
  events: Array<{ state: string; service: string; agent_id?: string | null; code?: number | null; detail?: Record<string, unknown> | null }>;
}

async function get<T>(path: string): Promise<T | undefined> {
  const res = await fetch(`${urls.ingress}${path}`, { headers: { authorization: `Bearer ${adminToken()}` } });
  return res.ok ? ((await res.json()) as T) : undefined;
}

const terminal = (id: string, state: string) =>
  eventually(`${id} ${state}`, async () => {
    const s = await get<Status>(`/v1/messages/${id}`);
    return s?.status === state ? s : undefined;
  });

beforeAll(async () => {
  producer = plainKafka().producer();
  await producer.connect();
});
afterEach(stopTestAgents);
afterAll(async () => {
  await producer.disconnect();
});

describe('end to end', () => {
  it('a plain kafkajs producer reaches an SDK agent; the timeline shows every hop with the routing decision', async () => {
    const capability = cap('parse');
    const worker = await startTestAgent({ handlers: { [capability]: async (m) => ({ seen: m.payload }) } });
    // The producer is an agent too: registered, with its own token on the record.
    const reg = await fetch(`${urls.registry}/v1/agents`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${adminToken()}` },
      body: JSON.stringify({ agent_type: 'e2e_producer', capabilities: [], metadata: { max_concurrency: 1 } }),
    }).then((r) => r.json() as Promise<{ agent_id: string; token: string }>);
    const registry = registryClient();
    const id = newMessageId();
    const value = await registry.encode(
      await registry.getLatestSchemaId('reach.ingress.v1-value'),
      testEnvelope({ message_id: id, capability, producer: reg.agent_id, payload: Buffer.from(JSON.stringify({ doc: 'a.pdf' })) }),
    );
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [{ key: id, value, headers: { 'reach-token': reg.token } }] });

    const done = await terminal(id, 'DELIVERED');
    expect(done.agent_id).toBe(worker.agentId);
    expect(worker.received.map((m) => m.payload)).toEqual([{ doc: 'a.pdf' }]);
    const timeline = await eventually('the full timeline', async () => {
      const t = await get<Timeline>(`/v1/messages/${id}/events`);
      return t && t.events.some((e) => e.state === 'DELIVERED') ? t : undefined;
    });
    expect(timeline.events.map((e) => e.state)).toEqual(expect.arrayContaining(['PENDING', 'ROUTED', 'DELIVERING', 'DELIVERED']));
    const routed = timeline.events.find((e) => e.state === 'ROUTED')!;
    expect(routed.service).toBe('router');
    expect(routed.detail).toMatchObject({ chosen: worker.agentId });
    expect((routed.detail as { candidates: Array<{ agent_id: string }> }).candidates.map((c) => c.agent_id)).toContain(worker.agentId);
  });

  it('spreads work over three agents and sends a session to the same agent every time', async () => {
    const capability = cap('spread');
    const agents = await Promise.all([0, 1, 2].map(() => startTestAgent({ handlers: { [capability]: async () => 'ok' } })));
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push((await client.submit({ capability, payload: i })).message_id);
    const session = uniqueName('session');
    const sticky: string[] = [];
    for (let i = 0; i < 8; i++) sticky.push((await client.submit({ capability, payload: i, session_id: session })).message_id);
    const delivered = await Promise.all([...ids, ...sticky].map((id) => terminal(id, 'DELIVERED')));
    const byAgent = new Map<string, number>();
    for (const s of delivered.slice(0, 30)) byAgent.set(s.agent_id!, (byAgent.get(s.agent_id!) ?? 0) + 1);
    expect(byAgent.size, 'every idle agent gets some of the work').toBe(3);
    expect(new Set(delivered.slice(30).map((s) => s.agent_id)).size, 'one session, one agent').toBe(1);
    expect(agents.reduce((n, a) => n + a.received.length, 0)).toBe(38);
  });

  it('every terminal state is visible through GET /v1/messages/{id}: DELIVERED, REJECTED by the agent, REJECTED for no route, DEAD when expired', async () => {
    const capability = cap('states');
    await startTestAgent({
      handlers: {
        [capability]: async (m) => {
          if ((m.payload as { fail?: boolean }).fail) throw new NonRetryableError('AGENT_REJECTED', 'cannot parse');
          return 'fine';
        },
      },
    });
    const ok = await client.submit({ capability, payload: { fail: false } });
    const refused = await client.submit({ capability, payload: { fail: true } });
    const noRoute = await client.submit({ capability: cap('nobody'), payload: {} });
    // Accepted (expire_at is after created_at) but already past: the router declares it DEAD.
    const expired = await client.submit({ capability, payload: {}, created_at: Date.now() - 5000, expire_at: Date.now() - 1 });

    expect((await terminal(ok.message_id, 'DELIVERED')).agent_id).toBeTruthy();
    expect(await terminal(refused.message_id, 'REJECTED')).toMatchObject({ code: 3003 });
    expect(await terminal(noRoute.message_id, 'REJECTED')).toMatchObject({ code: 2001 });
    expect(await terminal(expired.message_id, 'DEAD')).toMatchObject({ code: 3006 });

    // Each stage packs its status events into its own batch record, so the tracker may take the
    // router's or dispatcher's event before ingress's PENDING: the status row is right at once, the
    // timeline is whole a moment later. Once whole, it reads in order from PENDING.
    for (const id of [ok.message_id, refused.message_id, noRoute.message_id, expired.message_id]) {
      const t = await eventually(`${id}: the whole timeline`, async () => {
        const got = await get<Timeline>(`/v1/messages/${id}/events`);
        return got && got.events.some((e) => e.state === 'PENDING') ? got : undefined;
      });
      expect(t.events[0]!.state, id).toBe('PENDING');
    }
  });
});
