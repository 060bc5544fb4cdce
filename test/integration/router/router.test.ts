import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { createRedis, type Redis } from '@reach/store';
import { silentLogger } from '@reach/core';
import { plainKafka, registryClient, TopicTap, type Tapped, statusTap } from '../../helpers/kafka.js';
import { adminToken, stack, uniq, urls } from '../../helpers/env.js';
import { envelope, FakeRegistry, routerSees, type FakeAgent } from './fake-registry.js';

// The router against the running stack: fake agents are written to the registry feeds
// (reach.agents.v1 / reach.presence.v1) exactly as the registry and dispatcher would, envelopes
// to reach.pending.v1 as ingress would, and the router's outputs are read back from
// reach.routed.v1, the status events (reach.status-batches.v1), reach.dlq.v1 and reach.retry.v1.
type Rec = Record<string, unknown>;

const kafka = plainKafka();
const registry = registryClient();
let producer: Producer;
let fake: FakeRegistry;
let routed: TopicTap<Rec>;
let status: TopicTap<Rec>;
let dlq: TopicTap<Rec>;
let retry: TopicTap<Rec>;
let pending: TopicTap<Rec>;
let redis: Redis;
const token = adminToken();

beforeAll(async () => {
  producer = kafka.producer();
  await producer.connect();
  fake = await new FakeRegistry(producer, registry).init();
  const tap = (topic: string) => new TopicTap<Rec>(kafka, topic, registry).open();
  [routed, status, dlq, retry, pending] = await Promise.all([
    tap('reach.routed.v1'),
    statusTap<Rec>(kafka, registry).open(),
    tap('reach.dlq.v1'),
    tap('reach.retry.v1'),
    tap('reach.pending.v1'),
  ]);
  redis = createRedis(stack.redisUrl, silentLogger, { connectionName: 'reach-router-test' });
});

afterAll(async () => {
  await Promise.all([routed, status, dlq, retry, pending].map((t) => t?.close()));
  await producer?.disconnect();
  redis?.disconnect();
});

async function register(...agents: FakeAgent[]): Promise<void> {
  await fake.publish(...agents);
  await routerSees(urls.router, token, agents);
}

const envOf = (r: Tapped<Rec>) => r.value?.envelope as Rec | undefined;
const detailOf = (r: Tapped<Rec>) => JSON.parse(r.value!.detail_json as string) as Rec;
const routedFor = (messageId: string) => routed.records.filter((r) => r.value?.message_id === messageId);
const statusFor = (messageId: string, state?: string) => (r: Tapped<Rec>) =>
  r.value?.message_id === messageId && (state === undefined || r.value.state === state);

/** Resolves once `n` records match, and returns them. */
async function waitForCount<T>(tap: TopicTap<T>, pred: (r: Tapped<T>) => boolean, n: number, timeoutMs = 20_000): Promise<Array<Tapped<T>>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const hits = tap.records.filter(pred);
    if (hits.length >= n) return hits;
    if (Date.now() > deadline) throw new Error(`only ${hits.length} of ${n} matching records`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('router', () => {
  it('routes each message to exactly one agent, and the lowest load RATE wins most', async () => {
    const capability = uniq('it:parse');
    // Absolute counts point the other way: `rate` runs 10 tasks but at 10 % of its capacity.
    const rate = { id: uniq('it.rate'), capabilities: [{ name: capability }], maxConcurrency: 100, currentLoad: 10 };
    const half = { id: uniq('it.half'), capabilities: [{ name: capability }], maxConcurrency: 4, currentLoad: 2 };
    const busy = { id: uniq('it.busy'), capabilities: [{ name: capability }], maxConcurrency: 10, currentLoad: 7 };
    // Offers a similar name only: never a candidate (R-B1).
    const similar = { id: uniq('it.similar'), capabilities: [{ name: `${capability}_items` }] };
    await register(rate, half, busy, similar);

    const sent = Array.from({ length: 20 }, () => envelope({ capability }));
    for (const env of sent) await fake.sendPending(env);
    const ids = sent.map((e) => e.message_id as string);
    const deliveries = await waitForCount(routed, (r) => ids.includes(r.value?.message_id as string), ids.length);

    const counts = new Map<string, number>();
    for (const d of deliveries) counts.set(d.value!.agent_id as string, (counts.get(d.value!.agent_id as string) ?? 0) + 1);
    expect(counts.get(rate.id) ?? 0).toBeGreaterThan((counts.get(half.id) ?? 0) + (counts.get(busy.id) ?? 0));
    expect(counts.has(similar.id)).toBe(false);
    // Exactly one delivery per message, keyed by the agent, with the ack deadline set.
    for (const id of ids) expect(routedFor(id)).toHaveLength(1);
    const first = deliveries[0]!;
    expect(first.key).toBe(first.value!.agent_id);
    expect(first.value).toMatchObject({ attempt: 0, parent_message_id: null });
    expect((first.value!.deadline_at as number) - (first.value!.routed_at as number)).toBe(10_000);
    expect(envOf(first)?.capability).toBe(capability);

    // The ROUTED status records the decision (R-B12).
    const st = await status.waitFor(statusFor(ids[0]!, 'ROUTED'));
    expect(st.value).toMatchObject({ service: 'router', attempt: 0, agent_id: routedFor(ids[0]!)[0]!.value!.agent_id });
    const detail = detailOf(st);
    expect(detail).toMatchObject({ strategy: 'weighted', candidates_total: 3, chosen: st.value!.agent_id });
    const listed = detail.candidates as Array<Rec>;
    expect(listed.map((c) => c.agent_id).sort()).toEqual([rate.id, half.id, busy.id].sort());
    expect(listed.find((c) => c.agent_id === rate.id)).toMatchObject({ load_rate: 0.1, health: 1 });
    expect(listed.find((c) => c.agent_id === half.id)).toMatchObject({ load_rate: 0.5 });
  });

  it('honours the envelope timeout_ms for the ack deadline and the reach-attempt header', async () => {
    const capability = uniq('it:timeout');
    const a = { id: uniq('it.agent'), capabilities: [{ name: capability }] };
    await register(a);
    const env = envelope({ capability, timeout_ms: 1234 });
    await fake.sendPending(env, { 'reach-attempt': '2' });
    const d = await routed.waitFor((r) => r.value?.message_id === env.message_id);
    expect(d.value).toMatchObject({ agent_id: a.id, attempt: 2 });
    expect((d.value!.deadline_at as number) - (d.value!.routed_at as number)).toBe(1234);
    const st = await status.waitFor(statusFor(env.message_id as string, 'ROUTED'));
    expect(st.value!.attempt).toBe(2);
  });

  it('routes to the preferred agent when it is a candidate, and to target_agent_id directly', async () => {
    const capability = uniq('it:pref');
    const best = { id: uniq('it.best'), capabilities: [{ name: capability }] };
    const preferred = { id: uniq('it.pref'), capabilities: [{ name: capability }], currentLoad: 6 };
    await register(best, preferred);
    const env = envelope({ capability, headers: { 'reach-preferred-agent': preferred.id } });
    await fake.sendPending(env);
    expect((await routed.waitFor((r) => r.value?.message_id === env.message_id)).value!.agent_id).toBe(preferred.id);
    expect(detailOf(await status.waitFor(statusFor(env.message_id as string, 'ROUTED')))).toMatchObject({
      strategy: 'preferred',
      preferred: { agent_id: preferred.id, honoured: true },
    });

    const direct = envelope({ target_agent_id: best.id });
    await fake.sendPending(direct);
    expect((await routed.waitFor((r) => r.value?.message_id === direct.message_id)).value!.agent_id).toBe(best.id);
  });

  it('keeps a session on its agent (binding in Redis) and re-binds when that agent goes away', async () => {
    const capability = uniq('it:chat');
    const a = { id: uniq('it.a'), capabilities: [{ name: capability }], currentLoad: 2 };
    const b = { id: uniq('it.b'), capabilities: [{ name: capability }], currentLoad: 2 };
    await register(a, b);
    const session = uniq('session');
    const sent = Array.from({ length: 8 }, () => envelope({ capability, session_id: session }));
    for (const env of sent) await fake.sendPending(env);
    const ids = sent.map((e) => e.message_id as string);
    const deliveries = await waitForCount(routed, (r) => ids.includes(r.value?.message_id as string), ids.length);
    const agents = new Set(deliveries.map((d) => d.value!.agent_id));
    expect(agents.size).toBe(1);
    const bound = [...agents][0] as string;
    expect(await redis.get(`reach:sticky:${capability}:${session}`)).toBe(bound);
    const ttl = await redis.ttl(`reach:sticky:${capability}:${session}`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1800);
    const st = await status.waitFor(statusFor(ids[7]!, 'ROUTED'));
    expect(detailOf(st)).toMatchObject({ strategy: 'sticky', sticky: { session_id: session, source: 'store', bound, kept: true } });

    // The bound agent goes OFFLINE: the session moves to the other one and stays there.
    const gone = bound === a.id ? a : b;
    const other = bound === a.id ? b : a;
    await register({ ...gone, status: 'OFFLINE', revision: 2 });
    const later = [envelope({ capability, session_id: session }), envelope({ capability, session_id: session })];
    for (const env of later) await fake.sendPending(env);
    for (const env of later) expect((await routed.waitFor((r) => r.value?.message_id === env.message_id)).value!.agent_id).toBe(other.id);
    expect(await redis.get(`reach:sticky:${capability}:${session}`)).toBe(other.id);
  });

  it('fans a topic out to each of three subscribers as separately tracked copies', async () => {
    const topic = uniq('it.news');
    const subs = [1, 2, 3].map((i) => ({ id: uniq(`it.sub${i}`), capabilities: [{ name: topic, mode: 'subscribe' as const }] }));
    const handler = { id: uniq('it.handler'), capabilities: [{ name: topic }] };
    await register(...subs, handler);
    const env = envelope({ topic, message_type: 'event' });
    await fake.sendPending(env);

    const copies = await waitForCount(routed, (r) => r.value?.parent_message_id === env.message_id, 3);
    expect(copies.map((c) => c.value!.agent_id).sort()).toEqual(subs.map((s) => s.id).sort());
    const copyIds = copies.map((c) => c.value!.message_id as string);
    expect(new Set(copyIds).size).toBe(3);
    expect(copyIds).not.toContain(env.message_id);
    for (const c of copies) {
      expect(c.key).toBe(c.value!.agent_id);
      expect(envOf(c)).toMatchObject({ message_id: c.value!.message_id, topic, trace_id: env.trace_id });
      const st = await status.waitFor(statusFor(c.value!.message_id as string, 'ROUTED'));
      expect(st.value).toMatchObject({ agent_id: c.value!.agent_id, parent_message_id: env.message_id });
    }
    expect(routedFor(env.message_id as string)).toHaveLength(0);
    const parent = await status.waitFor(statusFor(env.message_id as string, 'ROUTED'));
    const detail = detailOf(parent);
    expect(detail).toMatchObject({ strategy: 'broadcast', copies_total: 3 });
    expect((detail.copies as Rec[]).map((c) => c.message_id).sort()).toEqual([...copyIds].sort());
    // The parent's part ends with the fan-out: DELIVERED, no agent; each copy answers on its own id.
    const done = await status.waitFor(statusFor(env.message_id as string, 'DELIVERED'));
    expect(done.value).toMatchObject({ service: 'router', agent_id: null, code: null });
    expect(detailOf(done)).toMatchObject({ fanned_out: { copies_total: 3 } });
  });

  it('rejects a message with no route and no expire_at at once (2001) with a receipt', async () => {
    const env = envelope({ capability: uniq('it:nobody') });
    await fake.sendPending(env);
    const st = await status.waitFor(statusFor(env.message_id as string, 'REJECTED'));
    expect(st.value).toMatchObject({ code: 2001, service: 'router' });
    const receipt = await pending.waitFor((r) => r.value?.message_type === 'reach.receipt' && r.value.correlation_id === env.message_id);
    expect(receipt.value).toMatchObject({ target_agent_id: env.producer, producer: 'reach' });
    expect(JSON.parse(Buffer.from(receipt.value!.payload as Buffer).toString())).toMatchObject({ message_id: env.message_id, status: 'REJECTED', code: 2001 });
    expect(dlq.records.some((r) => r.value?.message_id === env.message_id)).toBe(false);
    expect(routedFor(env.message_id as string)).toHaveLength(0);
  });

  it('parks a message with no route and a future expire_at in the DLQ (NO_ROUTE), still PENDING', async () => {
    const env = envelope({ capability: uniq('it:later'), expire_at: Date.now() + 10 * 60_000 });
    await fake.sendPending(env);
    const dead = await dlq.waitFor((r) => r.value?.message_id === env.message_id);
    expect(dead.value).toMatchObject({ reason: 'NO_ROUTE', code: 2001, service: 'router', source_topic: 'reach.pending.v1' });
    expect((dead.value!.envelope as Rec).message_id).toBe(env.message_id);
    const st = await status.waitFor(statusFor(env.message_id as string));
    expect(st.value).toMatchObject({ state: 'PENDING', code: 2001, reason: 'parked' });
    expect(status.records.some(statusFor(env.message_id as string, 'REJECTED'))).toBe(false);
  });

  it('declares an expired message DEAD (3006), dead-letters it as EXPIRED and sends a receipt', async () => {
    const capability = uniq('it:exp');
    await register({ id: uniq('it.agent'), capabilities: [{ name: capability }] });
    const now = Date.now();
    const env = envelope({ capability, created_at: now - 60_000, expire_at: now - 1_000 });
    await fake.sendPending(env);
    const st = await status.waitFor(statusFor(env.message_id as string, 'DEAD'));
    expect(st.value).toMatchObject({ code: 3006 });
    expect((await dlq.waitFor((r) => r.value?.message_id === env.message_id)).value).toMatchObject({ reason: 'EXPIRED', code: 3006 });
    await pending.waitFor((r) => r.value?.message_type === 'reach.receipt' && r.value.correlation_id === env.message_id);
    expect(routedFor(env.message_id as string)).toHaveLength(0);
  });

  it('holds a message while every candidate is saturated, and routes it once an agent has room', async () => {
    const capability = uniq('it:sat');
    const a = { id: uniq('it.hot1'), capabilities: [{ name: capability }], maxConcurrency: 10, currentLoad: 9 };
    const b = { id: uniq('it.hot2'), capabilities: [{ name: capability }], maxConcurrency: 20, currentLoad: 17 };
    await register(a, b);
    const env = envelope({ capability });
    await fake.sendPending(env);

    const held = await status.waitFor(statusFor(env.message_id as string, 'PENDING'));
    expect(held.value).toMatchObject({ code: 2002, service: 'router' });
    expect(detailOf(held)).toMatchObject({ reason: 'SATURATED', saturation: 0.8, chosen: null });
    const hold = await retry.waitFor((r) => r.value?.message_id === env.message_id);
    expect(hold.value).toMatchObject({ attempt: 0, code: 2002, reason: 'SATURATED', failed_agent_id: null });
    expect((hold.value!.envelope as Rec).message_id).toBe(env.message_id);
    // Still saturated: the retry-scheduler hands it back when due and the router holds it again.
    await waitForCount(retry, (r) => r.value?.message_id === env.message_id, 2);
    expect(routedFor(env.message_id as string)).toHaveLength(0);

    // b drops to 10 %: the next time the message comes round it goes to b, same attempt.
    await register({ ...b, currentLoad: 2, revision: 2 });
    const d = await routed.waitFor((r) => r.value?.message_id === env.message_id);
    expect(d.value).toMatchObject({ agent_id: b.id, attempt: 0 });
    expect(detailOf(await status.waitFor(statusFor(env.message_id as string, 'ROUTED')))).toMatchObject({ chosen: b.id });
  });

  it('holds a message while its only agent is reconnecting, and routes it, same attempt, once the agent is back', async () => {
    const capability = uniq('it:blip');
    const a = { id: uniq('it.blip'), capabilities: [{ name: capability }] };
    await register(a);
    // The socket died a moment ago: within the reconnect grace (REACH_WS_RECONNECT_GRACE_MS, 2 s).
    await register({ ...a, connected: false });
    const env = envelope({ capability });
    await fake.sendPending(env);

    const held = await status.waitFor(statusFor(env.message_id as string, 'PENDING'));
    expect(held.value).toMatchObject({ code: 2001, service: 'router', reason: 'held: the agent that would take it is reconnecting' });
    expect(detailOf(held)).toMatchObject({ reason: 'RECONNECTING', rejected: { reconnecting: 1 } });
    const hold = await retry.waitFor((r) => r.value?.message_id === env.message_id);
    expect(hold.value).toMatchObject({ attempt: 0, code: 2001, reason: 'RECONNECTING', failed_agent_id: null });

    await register({ ...a, revision: 2 });
    const d = await routed.waitFor((r) => r.value?.message_id === env.message_id);
    expect(d.value).toMatchObject({ agent_id: a.id, attempt: 0 });
    expect(status.records.filter(statusFor(env.message_id as string, 'REJECTED'))).toHaveLength(0);
  });

  it('refuses with 2001 once the reconnect grace has passed without the agent', async () => {
    const capability = uniq('it:gone');
    const a = { id: uniq('it.gone'), capabilities: [{ name: capability }] };
    await register(a);
    await register({ ...a, connected: false });
    const disconnectedBy = Date.now(); // the presence record's `at` is no later than this
    const env = envelope({ capability });
    await fake.sendPending(env);
    const rejected = await status.waitFor(statusFor(env.message_id as string, 'REJECTED'), 15_000);
    expect(rejected.value).toMatchObject({ code: 2001 });
    const holds = retry.records.filter((r) => r.value?.message_id === env.message_id);
    expect(holds.length).toBeGreaterThan(0);
    expect(holds.every((r) => r.value?.reason === 'RECONNECTING')).toBe(true);
    // Every hold waited within the grace: the last one was due by its end.
    expect(Math.max(...holds.map((r) => Number(r.value!.not_before)))).toBeLessThanOrEqual(disconnectedBy + 2_000);
  });

  it('answers 2002 SATURATED with a receipt when the sender asked for QUEUE_REQUEST', async () => {
    const capability = uniq('it:satq');
    await register({ id: uniq('it.hot'), capabilities: [{ name: capability }], currentLoad: 10 });
    const env = envelope({ capability, headers: { 'reach-on-saturation': 'QUEUE_REQUEST' } });
    await fake.sendPending(env);
    const st = await status.waitFor(statusFor(env.message_id as string, 'REJECTED'));
    expect(st.value).toMatchObject({ code: 2002 });
    const receipt = await pending.waitFor((r) => r.value?.message_type === 'reach.receipt' && r.value.correlation_id === env.message_id);
    expect(JSON.parse(Buffer.from(receipt.value!.payload as Buffer).toString())).toMatchObject({ status: 'REJECTED', code: 2002, name: 'SATURATED' });
    expect(retry.records.some((r) => r.value?.message_id === env.message_id)).toBe(false);
  });

  it('serves its own registry view to admins only', async () => {
    const a = { id: uniq('it.view'), capabilities: [{ name: uniq('it:view'), tags: ['x'] }], maxConcurrency: 8, currentLoad: 2 };
    await register(a);
    const anon = await fetch(`${urls.router}/v1/view/agents/${a.id}`);
    expect(anon.status).toBe(401);
    expect(((await anon.json()) as { error: { code: number } }).error.code).toBe(1003);
    const res = await fetch(`${urls.router}/v1/view/agents/${a.id}`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ agent_id: a.id, revision: 1, status: 'ONLINE', load_rate: 0.25, presence: { connected: true } });
    const missing = await fetch(`${urls.router}/v1/view/agents/${uniq('nobody')}`, { headers: { authorization: `Bearer ${token}` } });
    expect(missing.status).toBe(404);
    await missing.body?.cancel();
  });

  it('exposes reach_router_* metrics', async () => {
    const text = await (await fetch(`${urls.router}/metrics`)).text();
    for (const outcome of ['routed', 'fanout', 'no_route', 'saturated', 'expired']) {
      expect(text).toMatch(new RegExp(`reach_router_decisions_total\\{outcome="${outcome}"\\} [1-9]`));
    }
    expect(text).toMatch(/reach_router_candidates_per_decision_bucket/);
    expect(text).toMatch(/reach_router_route_duration_seconds_bucket/);
    expect(text).toMatch(/reach_router_hop_duration_seconds_bucket/);
  });
});
