import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { urls } from '../../helpers/env.js';
import { plainKafka, registryClient, TopicTap, statusTap } from '../../helpers/kafka.js';
import { scrape, total } from '../../helpers/metrics.js';
import { agentId, messageIdOf, Router, startInstance, TestAgent, type Instance } from './harness.js';

// Scale-out (R-C10): two dispatcher instances share reach.routed.v1's partitions in the
// group reach-dispatcher. An agent receives every delivery meant for it whichever instance
// consumed it and whichever instance holds its socket, and a reconnect to the other instance
// gets the replay.
const kafka = plainKafka();
const registry = registryClient();
let producer: Producer;
let router: Router;
let status: TopicTap<Record<string, unknown>>;
let second: Instance;

/**
 * How many routed deliveries each instance has consumed so far. (The DELIVERING event of a sent
 * delivery names the instance that sent it — the one holding the socket — not the consumer.)
 */
async function consumed(): Promise<{ main: number; second: number }> {
  const name = 'reach_dispatcher_routed_deliveries_total';
  const [main, other] = await Promise.all([scrape(urls.dispatcher), scrape(second.http)]);
  return { main: total(main, name), second: total(other, name) };
}

beforeAll(async () => {
  producer = kafka.producer();
  await producer.connect();
  router = await new Router(producer, registry).init();
  status = await statusTap<Record<string, unknown>>(kafka, registry).open();
  second = await startInstance();
  // Wait for the group to rebalance: until the new instance consumes deliveries of some agents.
  const deadline = Date.now() + 45_000;
  for (;;) {
    const before = (await consumed()).second;
    const probes = Array.from({ length: 12 }, () => agentId('it.probe'));
    await Promise.all(probes.map((p) => router.route(p)));
    await new Promise((r) => setTimeout(r, 1_000));
    if ((await consumed()).second > before) break;
    if (Date.now() > deadline) throw new Error('the second dispatcher instance never got partitions of reach.routed.v1');
  }
}, 60_000);

afterAll(async () => {
  await Promise.all([status?.close(), producer?.disconnect(), second?.stop()]);
});

describe('dispatcher: two instances', () => {
  it('each agent gets all its deliveries, in order, whichever instance consumed them and holds its socket', async () => {
    const agents = Array.from({ length: 12 }, (_, i) => ({ id: agentId(`it.so${i}`), url: i % 2 === 0 ? second.ws : urls.ws }));
    const conns = await Promise.all(agents.map((a) => TestAgent.connect(a.id, { url: a.url })));
    const sent = new Map<string, Array<Record<string, unknown>>>();
    const before = await consumed();
    for (const a of agents) {
      const envs = Array.from({ length: 5 }, (_, i) => router.envelope({ payload: Buffer.from(JSON.stringify({ i })) }));
      sent.set(a.id, envs);
      await router.routeMany(a.id, envs);
    }
    for (const [i, a] of agents.entries()) {
      const got = await conns[i]!.agent.waitCount((f) => f.type === 'deliver', 5);
      expect(got.map((f) => f.seq)).toEqual([1, 2, 3, 4, 5]);
      expect(got.map(messageIdOf)).toEqual(sent.get(a.id)!.map((e) => e.message_id));
    }
    // Both instances consumed some of them: deliveries crossed between instances over Redis.
    const after = await consumed();
    expect(after.main - before.main).toBeGreaterThan(0);
    expect(after.second - before.second).toBeGreaterThan(0);
    expect(after.main - before.main + (after.second - before.second)).toBeGreaterThanOrEqual(60);
    await Promise.all(conns.map((c) => c.agent.close()));
  });

  it('an agent that reconnects to the other instance gets its un-acked deliveries replayed', async () => {
    const id = agentId();
    const onSecond = await TestAgent.connect(id, { url: second.ws });
    const envs = Array.from({ length: 6 }, () => router.envelope());
    await router.routeMany(id, envs);
    const got = await onSecond.agent.waitCount((f) => f.type === 'deliver', 6);
    onSecond.agent.send({ type: 'ack', seq: got[0]!.seq, message_id: messageIdOf(got[0]!) });
    onSecond.agent.send({ type: 'ack', seq: got[1]!.seq, message_id: messageIdOf(got[1]!) });
    await status.waitFor((r) => r.value?.message_id === messageIdOf(got[1]!) && r.value?.state === 'DELIVERED');
    await onSecond.agent.close();

    const onMain = await TestAgent.connect(id, { url: urls.ws, lastSeq: 3 });
    const replay = await onMain.agent.waitCount((f) => f.type === 'deliver', 3);
    expect(replay.map((f) => f.seq)).toEqual([4, 5, 6]);
    expect(replay.map(messageIdOf)).toEqual(envs.slice(3).map((e) => e.message_id));
    await onMain.agent.close();

    // And back again, everything still un-acked (3 was never acked either).
    const back = await TestAgent.connect(id, { url: second.ws });
    const all = await back.agent.waitCount((f) => f.type === 'deliver', 4);
    expect(all.map((f) => f.seq)).toEqual([3, 4, 5, 6]);
    await back.agent.close();
  });
});
