import { afterEach, describe, expect, it } from 'vitest';
import { AgentNode, NonRetryableError, type ReachMessage } from '@reach/sdk';
import { localStack, startTestAgent, stopTestAgents, testClient, uniqueName } from '@reach/sdk/testing';
import { adminToken, urls } from '../../helpers/env.js';

// The SDK against the real running stack: registry (:7411), dispatcher WebSocket (:7412),
// ingress (:7410), router, tracker — through Kafka. Capability names are unique per test
// (the registry's tag grammar: lowercase verb_object).

const cap = (verb: string) => `${verb}_${uniqueName('t').replace(/[^a-z0-9]/g, '')}`;

afterEach(stopTestAgents);

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('AgentNode on the real stack', () => {
  it('uses the stack the testing kit finds', () => {
    const stack = localStack();
    expect(stack).toMatchObject({ registryUrl: urls.registry, ingressUrl: urls.ingress, dispatcherUrl: urls.ws });
    expect(stack.adminToken).toBe(adminToken());
  });

  it('[deliver-ack] registers its capability, serves an HTTP request with wait_ms, and the message ends DELIVERED with the result', async () => {
    const echo = cap('echo');
    const agent = await startTestAgent({ handlers: { [echo]: async (m: ReachMessage<{ n: number }>) => ({ doubled: m.payload!.n * 2 }) } });
    const client = testClient();
    const listed = await client.agents({ capability: echo });
    expect(listed.map((a) => a.agent_id)).toEqual([agent.agentId]);
    expect(listed[0]).toMatchObject({ status: 'ONLINE' });

    const out = await client.submit({ capability: echo, payload: { n: 21 } }, { waitMs: 15_000 });
    expect(out).toMatchObject({ status: 'DELIVERED', result: { status: 'ok', payload: { doubled: 42 } } });
    expect(agent.received.map((m) => m.message_id)).toEqual([out.message_id]);
    const status = await until('tracker DELIVERED', async () => {
      const s = await client.status(out.message_id);
      return s.status === 'DELIVERED' && s;
    });
    expect(status.agent_id).toBe(agent.agentId);
  });

  it('[request-result] request() between two agents returns the result and the updated context fragments (R-C9, R-G3)', async () => {
    const plan = cap('plan');
    await startTestAgent({
      handlers: {
        [plan]: async (m: ReachMessage<{ goal: string }>, ctx) => {
          const user = ctx.session.getJson<{ name: string }>('user');
          ctx.session.setJson('plan', { steps: [`greet ${user?.name ?? '?'}`, m.payload!.goal] });
          return { ok: true, session: ctx.session.id };
        },
      },
    });
    const caller = await startTestAgent();
    const reply = await caller.node.requestReply(plan, { goal: 'ship' }, { timeoutMs: 20_000, context: { user: '{"name":"Ada"}' }, sessionId: 'sess-1' });
    expect(reply.payload).toEqual({ ok: true, session: 'sess-1' });
    expect(reply.updated).toEqual({ plan: '{"steps":["greet Ada","ship"]}' });
    expect(reply.context).toEqual({ user: '{"name":"Ada"}', plan: '{"steps":["greet Ada","ship"]}' });
    expect(reply.message).toMatchObject({ message_type: 'task_result', target_agent_id: caller.agentId });
    // The reply went to the requester's node, never to a handler.
    expect(caller.received).toHaveLength(0);
  });

  it('request() fails fast with 2001 when no agent offers the capability (pre-flight, R-G6)', async () => {
    const caller = await startTestAgent();
    const nobody = cap('nobody');
    expect(await caller.node.canReach(nobody)).toBe(false);
    await expect(caller.node.request(nobody, {}, { timeoutMs: 20_000 })).rejects.toMatchObject({ code: 2001, retryable: false });
  });

  it('[reject-non-retryable] a NonRetryableError rejects the message with the agent code; the requester gets the failure receipt', async () => {
    const strict = cap('validate');
    let runs = 0;
    await startTestAgent({
      handlers: {
        [strict]: async () => {
          runs++;
          throw new NonRetryableError('INVALID_ENVELOPE', 'field total is missing');
        },
      },
    });
    const caller = await startTestAgent();
    const receipts: unknown[] = [];
    caller.node.on('receipt', (r) => receipts.push(r));
    const err = await caller.node.request(strict, { x: 1 }, { timeoutMs: 20_000 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ retryable: false });
    expect((err as { code: number }).code).not.toBe(3002);
    expect(runs).toBe(1);
    expect(receipts).toHaveLength(1);
    const about = (receipts[0] as { message_id: string }).message_id;
    // The read model is written asynchronously (the tracker gathers status events for up to
    // 100 ms): right after the receipt the message may not be visible yet.
    const status = await until('REJECTED', async () => {
      const s = await testClient()
        .status(about)
        .catch((e: unknown) => ((e as { code?: number }).code === 2001 || /not found/.test(String(e)) ? undefined : Promise.reject(e)));
      return s?.status === 'REJECTED' && s;
    });
    expect(status.code).toBeTypeOf('number');
  });

  it('heartbeats report the real in-flight load while a handler runs (R-A5, R-G1)', async () => {
    const slow = cap('crunch');
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const agent = await startTestAgent({
      descriptor: { ttl_s: 4, metadata: { max_concurrency: 2 } },
      handlers: {
        [slow]: async () => {
          await released;
          return 'done';
        },
      },
    });
    const client = testClient();
    const submitted = await client.submit({ capability: slow, payload: null });
    const busy = await until('registry shows current_load 1', async () => {
      const a = (await client.agents({ capability: slow }))[0];
      return a?.load?.current_load === 1 && a;
    });
    expect(busy.agent_id).toBe(agent.agentId);
    release();
    await until('DELIVERED', async () => (await client.status(submitted.message_id)).status === 'DELIVERED');
    await until('registry shows the agent idle again', async () => (await client.agents({ capability: slow }))[0]?.load?.current_load === 0);
  });

  it('publish() fans an event out to every subscriber of the topic (R-B8)', async () => {
    const topic = cap('orders');
    const a = await startTestAgent({ subscriptions: { [topic]: async () => undefined } });
    const b = await startTestAgent({ subscriptions: { [topic]: async () => undefined } });
    const producer = await startTestAgent();
    const id = await producer.node.publish(topic, { order: 7 });
    expect(id).toMatch(/^msg_/);
    await until('both subscribers got the event', async () => a.received.length === 1 && b.received.length === 1);
    for (const r of [a.received[0]!, b.received[0]!])
      expect(r).toMatchObject({ topic, message_type: 'event', payload: { order: 7 }, producer: producer.agentId });
  });

  it('send() to an agent by id reaches its direct handler', async () => {
    const target = await startTestAgent({ direct: async () => 'got it' });
    const sender = await startTestAgent();
    const id = await sender.node.send({ target_agent_id: target.agentId, message_type: 'note', payload: 'hello' });
    await until('direct delivery', async () => target.received.length === 1);
    expect(target.received[0]).toMatchObject({ message_id: id, payload: 'hello', producer: sender.agentId });
  });

  it('stop() deregisters at once: the registry no longer lists the agent', async () => {
    const gone = cap('vanish');
    const agent = await startTestAgent({ handlers: { [gone]: async () => 1 } });
    const client = testClient();
    expect((await client.agents({ capability: gone })).length).toBe(1);
    await agent.stop();
    const left = await client.agents({ capability: gone });
    expect(left.filter((a) => a.status === 'ONLINE')).toEqual([]);
    expect(agent.node.status).toBe('stopped');
  });

  it('start() with a token the registry does not know fails with 1003 and registers nothing', async () => {
    const stack = localStack();
    const never = cap('never');
    const node = new AgentNode({
      registryUrl: stack.registryUrl,
      dispatcherUrl: stack.dispatcherUrl,
      descriptor: { agent_type: uniqueName('it-bad-token'), capabilities: [never] },
      token: 'not-a-token-the-registry-issued',
      handleSignals: false,
    });
    await expect(node.start()).rejects.toMatchObject({ code: 1003, codeName: 'AUTH_FAILED' });
    expect(node.status).toBe('stopped');
    expect(await testClient().agents({ capability: never })).toEqual([]);
  });
});
