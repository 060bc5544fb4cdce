import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { silentLogger } from '@reach/core';
import { createRedis, type Redis } from '@reach/store';
import { CircuitBreakers, DEFAULT_POLICY, type CircuitPolicy } from '@reach/circuits';
import { plainKafka, registryClient, TopicTap, type Tapped, statusTap } from '../../helpers/kafka.js';
import { adminToken, stack, uniq, urls } from '../../helpers/env.js';
import { envelope, FakeRegistry, routerSees, type FakeAgent } from '../router/fake-registry.js';

// The running router's circuit filter (R-B2, R-D8): outcomes are recorded in Redis the
// way the dispatcher records them; the router stops choosing an agent whose circuit is open,
// answers 3001 when that leaves nothing, sends one probe when the open period ends, and takes
// the agent back when the probe succeeds. The open period is fixed in Redis when a circuit
// opens, so a short REACH_CIRCUIT_OPEN_MS on the recording side is all the shared router needs.
type Rec = Record<string, unknown>;

const kafka = plainKafka();
const registry = registryClient();
const token = adminToken();
let producer: Producer;
let fake: FakeRegistry;
let routed: TopicTap<Rec>;
let status: TopicTap<Rec>;
let dlq: TopicTap<Rec>;
let pending: TopicTap<Rec>;
let redis: Redis;
const used: string[] = [];

const OPEN_MS = 1_500;
const policy: CircuitPolicy = { ...DEFAULT_POLICY, openMs: OPEN_MS };
let breakers: CircuitBreakers;

beforeAll(async () => {
  producer = kafka.producer();
  await producer.connect();
  fake = await new FakeRegistry(producer, registry).init();
  const tap = (topic: string) => new TopicTap<Rec>(kafka, topic, registry).open();
  [routed, status, dlq, pending] = await Promise.all([
    tap('reach.routed.v1'),
    statusTap<Rec>(kafka, registry).open(),
    tap('reach.dlq.v1'),
    tap('reach.pending.v1'),
  ]);
  redis = createRedis(stack.redisUrl, silentLogger, { connectionName: 'reach-router-circuits-test' });
  breakers = new CircuitBreakers(redis, policy);
});

afterAll(async () => {
  await Promise.all(used.map((id) => breakers?.reset(id)));
  await Promise.all([routed, status, dlq, pending].map((t) => t?.close()));
  await producer?.disconnect();
  redis?.disconnect();
});

function fakeAgent(capability: string): FakeAgent {
  const id = uniq('it.circuit.agent');
  used.push(id);
  return { id, capabilities: [{ name: capability }] };
}

async function register(...agents: FakeAgent[]): Promise<void> {
  await fake.publish(...agents);
  await routerSees(urls.router, token, agents);
}

/** Waits until the running router's local circuit map holds the agent in `state`. */
async function routerCircuit(agentId: string, state: 'closed' | 'open' | 'half_open', timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await fetch(`${urls.router}/v1/view/agents/${encodeURIComponent(agentId)}`, { headers: { authorization: `Bearer ${token}` } });
    const body = (await res.json()) as { circuit?: string };
    if (body.circuit === state) return;
    if (Date.now() > deadline) throw new Error(`router's circuit of ${agentId} is ${body.circuit}, not ${state}, after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Records n failures as the dispatcher would; `openMs` is the open period the circuit gets. */
async function failTimes(agentId: string, n: number, openMs = OPEN_MS): Promise<void> {
  const b = openMs === OPEN_MS ? breakers : new CircuitBreakers(redis, { ...policy, openMs });
  for (let i = 0; i < n; i++) await b.recordOutcome(agentId, false);
}

const LONG_OPEN_MS = 10 * 60_000;

const detailOf = (r: Tapped<Rec>) => JSON.parse(r.value!.detail_json as string) as Rec;
const byId = (id: unknown) => (r: Tapped<Rec>) => r.value?.message_id === id;

describe('router circuit filter', () => {
  it('stops choosing an agent whose circuit is open while another candidate is healthy', async () => {
    const capability = uniq('it:circuit');
    const broken = fakeAgent(capability);
    const healthy = fakeAgent(capability);
    await register(broken, healthy);
    await failTimes(broken.id, 10, LONG_OPEN_MS);
    await routerCircuit(broken.id, 'open');

    const sent = Array.from({ length: 10 }, () => envelope({ capability }));
    for (const env of sent) await fake.sendPending(env);
    for (const env of sent) {
      const d = await routed.waitFor(byId(env.message_id));
      expect(d.value!.agent_id).toBe(healthy.id);
    }
    const st = await status.waitFor((r) => r.value?.message_id === sent[0]!.message_id && r.value?.state === 'ROUTED');
    expect(detailOf(st)).toMatchObject({ candidates_total: 1, chosen: healthy.id, rejected: { circuit: 1 } });
  });

  it('answers REJECTED 3001 CIRCUIT_OPEN with a receipt when the only candidate is open, and parks it when expire_at is set', async () => {
    const capability = uniq('it:circuit');
    const only = fakeAgent(capability);
    await register(only);
    await failTimes(only.id, 10, LONG_OPEN_MS);
    await routerCircuit(only.id, 'open');

    const env = envelope({ capability });
    await fake.sendPending(env);
    const st = await status.waitFor((r) => r.value?.message_id === env.message_id && r.value?.state === 'REJECTED');
    expect(st.value).toMatchObject({ code: 3001, service: 'router' });
    expect(detailOf(st)).toMatchObject({ rejected: { circuit: 1 } });
    const receipt = await pending.waitFor((r) => r.value?.message_type === 'reach.receipt' && r.value.correlation_id === env.message_id);
    expect(JSON.parse(Buffer.from(receipt.value!.payload as Buffer).toString())).toMatchObject({
      message_id: env.message_id,
      status: 'REJECTED',
      code: 3001,
      name: 'CIRCUIT_OPEN',
    });
    expect(routed.records.some(byId(env.message_id))).toBe(false);

    const parked = envelope({ capability, expire_at: Date.now() + 60_000 });
    await fake.sendPending(parked);
    const dead = await dlq.waitFor(byId(parked.message_id));
    expect(dead.value).toMatchObject({ reason: 'NO_ROUTE', code: 3001, service: 'router' });
    const pst = await status.waitFor((r) => r.value?.message_id === parked.message_id && r.value?.state === 'PENDING' && r.value?.code === 3001);
    expect(pst.value).toMatchObject({ reason: 'parked' });

    // Addressed directly, the same: 3001.
    const direct = envelope({ target_agent_id: only.id });
    await fake.sendPending(direct);
    const dst = await status.waitFor((r) => r.value?.message_id === direct.message_id && r.value?.state === 'REJECTED');
    expect(dst.value).toMatchObject({ code: 3001 });
  });

  it('after the open period sends exactly one probe; its success closes the circuit and traffic resumes', async () => {
    const capability = uniq('it:circuit');
    const agent = fakeAgent(capability);
    await register(agent);
    await failTimes(agent.id, 10);
    const opened = await breakers.state(agent.id);
    expect(opened.effective).toBe('OPEN');
    await routerCircuit(agent.id, 'half_open', OPEN_MS + 10_000);

    // The first message is the probe; a second one while the probe is out finds the circuit
    // still half-open with its probe taken: 3001.
    const probe = envelope({ capability });
    await fake.sendPending(probe);
    const d = await routed.waitFor(byId(probe.message_id));
    expect(d.value!.agent_id).toBe(agent.id);
    const pst = await status.waitFor((r) => r.value?.message_id === probe.message_id && r.value?.state === 'ROUTED');
    expect(detailOf(pst)).toMatchObject({ strategy: 'circuit_probe', chosen: agent.id });
    expect(await breakers.state(agent.id)).toMatchObject({ state: 'HALF_OPEN', probeBy: expect.stringContaining('router') });

    const during = envelope({ capability });
    await fake.sendPending(during);
    const rej = await status.waitFor((r) => r.value?.message_id === during.message_id && r.value?.state === 'REJECTED');
    expect(rej.value).toMatchObject({ code: 3001 });

    // The dispatcher reports the probe's ack: closed for every instance.
    expect((await breakers.recordOutcome(agent.id, true)).transition).toEqual({ from: 'HALF_OPEN', to: 'CLOSED', reason: null });
    await routerCircuit(agent.id, 'closed');
    const after = Array.from({ length: 3 }, () => envelope({ capability }));
    for (const env of after) await fake.sendPending(env);
    for (const env of after) expect((await routed.waitFor(byId(env.message_id))).value!.agent_id).toBe(agent.id);

    const metrics = await (await fetch(`${urls.router}/metrics`)).text();
    expect(metrics).toMatch(/reach_router_circuit_open_agents\{state="OPEN"\} \d+/);
    expect(metrics).toMatch(/reach_router_circuit_transitions_total\{state="CLOSED"\} [1-9]/);
  });

  it('a failed probe re-opens the circuit and the router stops choosing the agent again', async () => {
    const capability = uniq('it:circuit');
    const agent = fakeAgent(capability);
    await register(agent);
    await failTimes(agent.id, 10);
    await routerCircuit(agent.id, 'half_open', OPEN_MS + 10_000);
    const probe = envelope({ capability });
    await fake.sendPending(probe);
    await routed.waitFor(byId(probe.message_id));
    const reopened = await new CircuitBreakers(redis, { ...policy, openMs: LONG_OPEN_MS }).recordOutcome(agent.id, false);
    expect(reopened).toMatchObject({ state: 'OPEN', transition: { from: 'HALF_OPEN', to: 'OPEN' } });
    await routerCircuit(agent.id, 'open');
    const next = envelope({ capability });
    await fake.sendPending(next);
    const st = await status.waitFor((r) => r.value?.message_id === next.message_id && r.value?.state === 'REJECTED');
    expect(st.value).toMatchObject({ code: 3001 });
  });

  it('auto-ejects an agent whose recent success rate is too low (R-D13), though its failures never trip the breaker', async () => {
    const capability = uniq('it:eject');
    const weak = fakeAgent(capability);
    const healthy = fakeAgent(capability);
    await register(weak, healthy);
    // The breaker needs 1000 outcomes here: only the eject window (20 outcomes, < 50 % ok) can act.
    const recorder = new CircuitBreakers(redis, { ...policy, minVolume: 1000, openMs: LONG_OPEN_MS });
    let last;
    for (let i = 0; i < 20; i++) last = await recorder.recordOutcome(weak.id, i % 3 === 0);
    expect(last).toMatchObject({ state: 'OPEN', transition: { from: 'CLOSED', to: 'OPEN', reason: 'eject' } });
    await routerCircuit(weak.id, 'open');
    const sent = Array.from({ length: 5 }, () => envelope({ capability }));
    for (const env of sent) await fake.sendPending(env);
    for (const env of sent) expect((await routed.waitFor(byId(env.message_id))).value!.agent_id).toBe(healthy.id);
  });
});
