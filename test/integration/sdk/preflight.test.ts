import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '@reach/core';
import { CircuitBreakers, DEFAULT_POLICY } from '@reach/circuits';
import { AgentNode, RegistryClient, type AgentConnection, type AgentFrame, type RegistryApi } from '@reach/sdk';
import { localStack, startTestAgent, stopTestAgents, testClient, uniqueName, waitUntilRoutable } from '@reach/sdk/testing';
import { createRedis, type Redis } from '@reach/store';
import { adminToken, stack } from '../../helpers/env.js';

// Pre-flight from a local view (R-G6) against the real stack: the node subscribes to its
// dispatcher's `routes` view over its own socket and refuses what the router would refuse —
// 2001, 2003, 3001 — without a round trip; what the view allows is delivered.

const cap = (verb: string) => `${verb}_${uniqueName('t').replace(/[^a-z0-9]/g, '')}`;
const openCircuits: string[] = [];
let redis: Redis;
let breakers: CircuitBreakers;

beforeAll(() => {
  redis = createRedis(stack.redisUrl, silentLogger, { connectionName: 'reach-preflight-test' });
  breakers = new CircuitBreakers(redis, { ...DEFAULT_POLICY, openMs: 10 * 60_000 });
});
afterEach(stopTestAgents);
afterAll(async () => {
  await Promise.all(openCircuits.map((id) => breakers.reset(id)));
  redis.disconnect();
});

async function verdict(node: AgentNode, name: string, expected: number | undefined, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (node.routeVerdict(name) !== expected) {
    if (Date.now() > deadline) throw new Error(`routes view of ${name} is ${node.routeVerdict(name)}, not ${expected}, after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The node's registry client, to show that a pre-flight refusal asks nobody. */
function registryOf(node: AgentNode): RegistryApi {
  return (node as unknown as { registry: RegistryApi }).registry;
}

/** The message ids of the `send` frames the node writes to its socket from now on: a pre-flight refusal writes none. */
function sendFrames(node: AgentNode): unknown[] {
  const socket = (node as unknown as { socket: AgentConnection }).socket;
  const sent: unknown[] = [];
  const write = socket.send.bind(socket);
  vi.spyOn(socket, 'send').mockImplementation((frame: AgentFrame) => {
    if (frame.type === 'send') sent.push((frame as { message_id?: unknown }).message_id);
    return write(frame);
  });
  return sent;
}

describe('pre-flight from the local routes view, on the stack', () => {
  it('allows and delivers what is routable; refuses 2001 for an agent that is registered but not connected, without asking the registry', async () => {
    const echo = cap('echo');
    await startTestAgent({ handlers: { [echo]: async (m) => m.payload } });
    const absent = cap('absent');
    const registry = new RegistryClient(localStack().registryUrl);
    const reg = await registry.register({ agent_type: 'absent', capabilities: [absent] }, adminToken());
    const caller = await startTestAgent();
    try {
      await verdict(caller.node, echo, 0);
      expect(await caller.node.request(echo, { hi: 1 }, { timeoutMs: 15_000 })).toEqual({ hi: 1 });
      await verdict(caller.node, absent, 2001);

      const list = vi.spyOn(registryOf(caller.node), 'list');
      await expect(caller.node.request(absent, {})).rejects.toMatchObject({ code: 2001, details: { preflight: 'local' } });
      expect(list).not.toHaveBeenCalled();
      // A name the view does not hold may be an agent registered a moment ago: the registry is asked.
      const unknown = cap('nobody');
      expect(caller.node.routeVerdict(unknown)).toBeUndefined();
      await expect(caller.node.request(unknown, {})).rejects.toMatchObject({ code: 2001, details: { capability: unknown } });
      expect(list).toHaveBeenCalledTimes(1);
    } finally {
      await registry.deregister(reg.agent_id, reg.token);
    }
  });

  it('2003: the only agent is in a security domain no grant opens; the router refuses the same when sent anyway', async () => {
    const ledger = cap('read');
    await startTestAgent({ handlers: { [ledger]: async () => 'ledger' }, descriptor: { metadata: { domain: uniqueName('finance') } } });
    const caller = await startTestAgent();
    await verdict(caller.node, ledger, 2003);
    await expect(caller.node.request(ledger, {})).rejects.toMatchObject({ code: 2003, details: { preflight: 'local' } });
    await expect(caller.node.request(ledger, {}, { preflight: false, timeoutMs: 15_000 })).rejects.toMatchObject({
      code: 2003,
      details: { status: 'REJECTED' },
    });
  });

  it('3001: the only agent has an open circuit; the view follows the circuit back to closed', async () => {
    const flaky = cap('flaky');
    const agent = await startTestAgent({ handlers: { [flaky]: async () => 'ok' } });
    const caller = await startTestAgent();
    await verdict(caller.node, flaky, 0);
    openCircuits.push(agent.agentId);
    await breakers.recordOutcome(agent.agentId, false, Date.now(), DEFAULT_POLICY.minVolume + 5);
    await verdict(caller.node, flaky, 3001);
    await expect(caller.node.request(flaky, {})).rejects.toMatchObject({ code: 3001, details: { preflight: 'local' } });
    await breakers.reset(agent.agentId);
    await verdict(caller.node, flaky, 0);
  });

  it('follows the agents: one that deregisters leaves the view', async () => {
    const passing = cap('passing');
    const agent = await startTestAgent({ handlers: { [passing]: async () => 'here' } });
    const caller = await startTestAgent();
    await verdict(caller.node, passing, 0);
    await agent.stop();
    await verdict(caller.node, passing, undefined);
  });

  it('send() and publish() with { preflight: true }: refused 2003 and 2001 from the view without writing a frame; what is routable is sent and delivered', async () => {
    const domain = uniqueName('finance');
    const ledger = cap('read');
    const echo = cap('echo');
    const closedTopic = cap('ledgerchanged');
    const openTopic = cap('orderplaced');
    const heard: unknown[] = [];
    await startTestAgent({
      handlers: { [ledger]: async () => 'ledger' },
      subscriptions: { [closedTopic]: async () => undefined },
      descriptor: { metadata: { domain } },
    });
    await startTestAgent({ handlers: { [echo]: async (m) => m.payload }, subscriptions: { [openTopic]: async (m) => void heard.push(m.payload) } });
    const absent = cap('absent');
    const registry = new RegistryClient(localStack().registryUrl);
    const reg = await registry.register({ agent_type: 'absent', capabilities: [absent] }, adminToken());
    const caller = await startTestAgent();
    try {
      // startTestAgent waited until the router and this node's view agree on the agents before it.
      expect([caller.node.routeVerdict(ledger), caller.node.routeVerdict(closedTopic, 'topic'), caller.node.routeVerdict(openTopic, 'topic')]).toEqual([
        2003, 2003, 0,
      ]);
      await verdict(caller.node, absent, 2001);
      const frames = sendFrames(caller.node);
      await expect(caller.node.send({ capability: ledger, payload: {} }, { preflight: true })).rejects.toMatchObject({
        code: 2003,
        details: { preflight: 'local' },
      });
      await expect(caller.node.publish(closedTopic, {}, { preflight: true })).rejects.toMatchObject({ code: 2003, details: { preflight: 'local' } });
      await expect(caller.node.send({ capability: absent, payload: {} }, { preflight: true })).rejects.toMatchObject({
        code: 2001,
        details: { preflight: 'local' },
      });
      expect(frames).toEqual([]);

      // Allowed: sent and delivered.
      const id = await caller.node.send({ capability: echo, payload: 'hi' }, { preflight: true });
      await vi.waitFor(async () => expect(await testClient().status(id)).toMatchObject({ status: 'DELIVERED', result: { status: 'ok', payload: 'hi' } }), {
        timeout: 15_000,
        interval: 100,
      });
      await caller.node.publish(openTopic, { n: 1 }, { preflight: true });
      await vi.waitFor(() => expect(heard).toEqual([{ n: 1 }]), { timeout: 15_000, interval: 50 });
      // A message that may wait (expire_at) is not refused for 2001: the router parks it for an agent to come.
      const parked = await caller.node.send({ capability: absent, payload: {}, expire_at: Date.now() + 60_000 }, { preflight: true });
      expect(frames).toEqual([id, expect.any(String), parked]);
    } finally {
      await registry.deregister(reg.agent_id, reg.token);
    }
  });

  it('waitUntilRoutable({ views }) returns once the router and the caller’s own view agree: the request right after is not refused', async () => {
    const late = cap('late');
    const caller = await startTestAgent();
    const stack = localStack();
    const node = new AgentNode({
      registryUrl: stack.registryUrl,
      dispatcherUrl: stack.dispatcherUrl,
      token: stack.adminToken,
      ...(stack.tls ? { tls: stack.tls } : {}),
      handleSignals: false,
      descriptor: { agent_type: uniqueName('late') },
    });
    node.handle(late, async () => 'here');
    await node.start();
    try {
      await waitUntilRoutable(node.agentId!, stack, { views: [caller.node] });
      expect(caller.node.routeVerdict(late)).toBe(0);
      const list = vi.spyOn(registryOf(caller.node), 'list');
      expect(await caller.node.request(late, {}, { timeoutMs: 15_000 })).toBe('here');
      expect(list).not.toHaveBeenCalled();
    } finally {
      await node.stop({ drainTimeoutMs: 0 });
    }
  });

  it('a view that is not complete refuses nothing: after a reconnect, none until the new connection’s full view', async () => {
    const echo = cap('echo');
    await startTestAgent({ handlers: { [echo]: async (m) => m.payload } });
    const caller = await startTestAgent();
    expect(caller.node.routesView).toBe('ready');
    const disconnected = new Promise<void>((resolve) => caller.node.on('disconnected', () => resolve()));
    const reconnected = new Promise<void>((resolve) => caller.node.on('connected', () => resolve()));
    (caller.node as unknown as { socket: AgentConnection }).socket.close(4000, 'test: drop the connection');
    await disconnected;
    // The reconnect waits its backoff (1 s and more): the old view is gone meanwhile.
    expect([caller.node.routesView, caller.node.routeVerdict(echo)]).toEqual(['waiting', undefined]);
    await reconnected;
    await verdict(caller.node, echo, 0);
    expect(caller.node.routesView).toBe('ready');
  });

  it('can be turned off: no view, and request() asks the registry as before', async () => {
    const caller = await startTestAgent({ node: { preflight: false } });
    expect(caller.node.routesView).toBe('off');
    const list = vi.spyOn(registryOf(caller.node), 'list');
    expect(caller.node.routeVerdict(cap('anything'))).toBeUndefined();
    // preflight: false on the node also skips the registry: the router refuses it.
    await expect(caller.node.request(cap('anything'), {}, { timeoutMs: 15_000 })).rejects.toMatchObject({ code: 2001, details: { status: 'REJECTED' } });
    expect(list).not.toHaveBeenCalled();
  });
});
