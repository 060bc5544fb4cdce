import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { adminToken, urls } from '../../helpers/env.js';
import { plainKafka, registryClient, TopicTap, statusTap } from '../../helpers/kafka.js';
import { eventually } from '../../helpers/wait.js';
import { CONSUME_PATIENCE_MS, deregisterAgent, FlowRouter, Holder, registerAgent, waitForFlow } from './concurrency-harness.js';
import { agentId, messageIdOf, startInstance, TestAgent } from './harness.js';

// Per-target concurrency cap with server-side queueing (R-D7): an agent never holds more
// than its max_concurrency un-acked deliveries, across dispatcher instances; the rest wait in
// Redis and flow, in order, as acks free slots; a reconnect replays only what is in flight; a
// raised max_concurrency applies at the next promotion; a waiting message whose time runs out
// ends DEAD (3006), never stuck.
const kafka = plainKafka();
const registry = registryClient();
let producer: Producer;
let router: FlowRouter;
let status: TopicTap<Record<string, unknown>>;
const registered: string[] = [];

async function agentWithCap(prefix: string, max: number): Promise<{ id: string; token: string }> {
  const id = agentId(prefix);
  const token = await registerAgent(id, max);
  registered.push(id);
  await waitForFlow(id, `the dispatcher to apply max_concurrency ${max}`, (f) => f.max_concurrency === max);
  return { id, token };
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

beforeAll(async () => {
  producer = kafka.producer();
  await producer.connect();
  router = await new FlowRouter(producer, registry).init();
  status = await statusTap<Record<string, unknown>>(kafka, registry).open();
});

afterAll(async () => {
  await Promise.all(registered.map(deregisterAgent));
  await Promise.all([status?.close(), producer?.disconnect()]);
});

describe('dispatcher: per-target concurrency (max_concurrency)', () => {
  it('never has more than max_concurrency un-acked; all 20 arrive in order as acks come back, none lost', async () => {
    const { id, token } = await agentWithCap('it.cap', 2);
    const { agent } = await TestAgent.connect(id, { token });
    const holder = new Holder(agent);
    const envs = Array.from({ length: 20 }, (_, i) => router.envelope({ payload: Buffer.from(JSON.stringify({ i })) }));
    await router.routeMany(id, envs);

    await waitForFlow(id, '2 in flight and 18 waiting', (f) => f.in_flight === 2 && f.waiting.NORMAL === 18);
    await holder.nth(2);
    expect(holder.unacked).toBe(2);
    // The slow handler: each delivery is answered only after the test has looked at it.
    for (let n = 1; n <= 20; n++) {
      const f = await holder.nth(n);
      expect(holder.unacked).toBeLessThanOrEqual(2);
      holder.ack(f);
    }
    expect(holder.maxUnacked).toBe(2);
    expect(holder.received.map(messageIdOf)).toEqual(envs.map((e) => e.message_id));
    expect(holder.received.map((f) => f.seq)).toEqual(range(1, 20));
    await waitForFlow(id, 'nothing in flight or waiting', (f) => f.in_flight === 0 && f.waiting.NORMAL === 0);

    // The timeline says where a waiting message was: DELIVERING in its lane, then with its seq.
    const last = envs[19]!.message_id as string;
    await status.waitFor((r) => r.value?.message_id === last && r.value?.state === 'DELIVERED', CONSUME_PATIENCE_MS);
    const delivering = status.records
      .filter((r) => r.value?.message_id === last && r.value?.state === 'DELIVERING')
      .map((r) => JSON.parse(r.value!.detail_json as string) as Record<string, unknown>);
    expect(delivering).toEqual([
      expect.objectContaining({ waiting: 'NORMAL' }),
      expect.objectContaining({ seq: 20, lane: 'NORMAL', waited_ms: expect.any(Number) }),
    ]);
  }, 120_000);

  it('replays only the in-flight deliveries to a reconnecting agent; the waiting ones follow as it acks', async () => {
    const { id, token } = await agentWithCap('it.cap.replay', 2);
    const first = await TestAgent.connect(id, { token });
    const envs = Array.from({ length: 5 }, () => router.envelope());
    await router.routeMany(id, envs);
    await first.agent.waitCount((f) => f.type === 'deliver', 2);
    await waitForFlow(id, '2 in flight and 3 waiting', (f) => f.in_flight === 2 && f.waiting.NORMAL === 3);
    await first.agent.close(); // nothing acked

    const { agent } = await TestAgent.connect(id, { token, lastSeq: 0 });
    const holder = new Holder(agent);
    const replayed = [await holder.nth(1), await holder.nth(2)];
    expect(replayed.map((f) => f.seq)).toEqual([1, 2]);
    expect(replayed.map(messageIdOf)).toEqual(envs.slice(0, 2).map((e) => e.message_id));
    for (let n = 1; n <= 5; n++) holder.ack(await holder.nth(n));
    expect(holder.maxUnacked).toBe(2);
    expect(holder.received.map(messageIdOf)).toEqual(envs.map((e) => e.message_id));
    expect(holder.received.map((f) => f.seq)).toEqual(range(1, 5));
  }, 120_000);

  it('applies a raised max_concurrency (re-registration) at the next promotion', async () => {
    const { id, token } = await agentWithCap('it.cap.raise', 1);
    const { agent } = await TestAgent.connect(id, { token });
    const holder = new Holder(agent);
    const envs = Array.from({ length: 4 }, () => router.envelope());
    await router.routeMany(id, envs);
    const f1 = await holder.nth(1);
    await waitForFlow(id, '1 in flight and 3 waiting', (f) => f.in_flight === 1 && f.waiting.NORMAL === 3);

    await registerAgent(id, 3); // same id: replaces the record
    await waitForFlow(id, 'the dispatcher to apply max_concurrency 3', (f) => f.max_concurrency === 3);
    holder.ack(f1);
    const rest = [await holder.nth(2), await holder.nth(3), await holder.nth(4)];
    expect(holder.unacked).toBe(3);
    expect(rest.map(messageIdOf)).toEqual(envs.slice(1).map((e) => e.message_id));
    for (const f of rest) holder.ack(f);
    await waitForFlow(id, 'nothing in flight', (f) => f.in_flight === 0);
  }, 120_000);

  it('ends a waiting message whose expire_at passes DEAD 3006 (queryable), and the agent never gets it', async () => {
    const { id, token } = await agentWithCap('it.cap.expire', 1);
    const { agent } = await TestAgent.connect(id, { token });
    const holder = new Holder(agent);
    const blocker = router.envelope();
    await router.routeMany(id, [blocker]);
    const held = await holder.nth(1);

    const doomed = router.envelope({ expire_at: Date.now() + 1500 });
    await router.routeMany(id, [doomed]);
    // It waited (the slot is held), in its lane...
    const queued = await status.waitFor((r) => r.value?.message_id === doomed.message_id && r.value?.state === 'DELIVERING', CONSUME_PATIENCE_MS);
    expect(JSON.parse(queued.value!.detail_json as string)).toMatchObject({ waiting: 'NORMAL' });
    // ...and left it when its time ran out.
    await waitForFlow(id, 'the waiting queue swept', (f) => f.waiting.NORMAL === 0);

    const final = await eventually(
      'DEAD 3006 in the message read model',
      async () => {
        const res = await fetch(`${urls.ingress}/v1/messages/${doomed.message_id as string}`, { headers: { authorization: `Bearer ${adminToken()}` } });
        const body = res.ok ? ((await res.json()) as { status: string; code: number | null }) : undefined;
        return body?.status === 'DEAD' ? body : undefined;
      },
      CONSUME_PATIENCE_MS,
    );
    expect(final.code).toBe(3006);

    // The slot still works: the next message flows once the blocker is answered.
    const next = router.envelope();
    await router.routeMany(id, [next]);
    holder.ack(held);
    const f2 = await holder.nth(2);
    expect(messageIdOf(f2)).toBe(next.message_id);
    holder.ack(f2);
    expect(holder.received.map(messageIdOf)).not.toContain(doomed.message_id);
  }, 120_000);
});

// Two dispatcher instances share the group: appends happen on whichever consumes the agent's
// partition, acks (and so promotions) on the one holding the socket; the cap lives in Redis.
describe('dispatcher: per-target concurrency across two instances', () => {
  it('holds the cap when the agent is connected to the other instance', async () => {
    const second = await startInstance();
    try {
      const { id, token } = await agentWithCap('it.cap.two', 3);
      await waitForFlow(id, 'the second instance to apply max_concurrency 3', (f) => f.max_concurrency === 3, second.http);
      const { agent } = await TestAgent.connect(id, { token, url: second.ws });
      const holder = new Holder(agent);
      const envs = Array.from({ length: 15 }, () => router.envelope());
      await router.routeMany(id, envs);
      // Consumption may pause while the group rebalances around the new instance.
      await waitForFlow(id, '3 in flight and 12 waiting', (f) => f.in_flight === 3 && f.waiting.NORMAL === 12);
      await holder.nth(3);
      expect(holder.unacked).toBe(3);
      for (let n = 1; n <= 15; n++) {
        const f = await holder.nth(n);
        expect(holder.unacked).toBeLessThanOrEqual(3);
        holder.ack(f);
      }
      expect(holder.maxUnacked).toBe(3);
      expect(holder.received.map(messageIdOf)).toEqual(envs.map((e) => e.message_id));
    } finally {
      await second.stop();
    }
  }, 150_000);
});
