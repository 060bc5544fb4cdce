import { afterEach, describe, expect, it, vi } from 'vitest';
import { AgentNode, modeOf, type ReachMessage } from '@reach/sdk';
import { LocalReach } from '@reach/sdk/direct';
import { createTestEnvironment, type TestEnvironment } from '@reach/sdk/testing';
import { BusClock } from '../../../packages/sdk/dist/direct/clock.js';

// The pieces of direct mode that are not scenarios (those run in both modes: sdk-scenarios.test.ts).

describe('modeOf (AGENT_REACH_MODE)', () => {
  it('takes the option, else AGENT_REACH_MODE, else queued', () => {
    expect(modeOf(undefined, {})).toBe('queued');
    expect(modeOf(undefined, { AGENT_REACH_MODE: 'direct' })).toBe('direct');
    expect(modeOf(undefined, { AGENT_REACH_MODE: ' Direct ' })).toBe('direct');
    expect(modeOf('queued', { AGENT_REACH_MODE: 'direct' })).toBe('queued');
  });

  it('refuses anything else', () => {
    expect(() => modeOf(undefined, { AGENT_REACH_MODE: 'local' })).toThrow(/direct or queued/);
  });
});

describe('BusClock', () => {
  it('fires what a skip makes due, earliest first, including timers those schedule', () => {
    const clock = new BusClock();
    const fired: string[] = [];
    clock.after(5_000, () => fired.push('5s'));
    clock.after(1_000, () => {
      fired.push('1s');
      clock.after(1_000, () => fired.push('1s+1s'));
    });
    const later = clock.after(60_000, () => fired.push('60s'));
    clock.skip(10_000);
    expect(fired).toEqual(['1s', '1s+1s', '5s']);
    expect(later.at - clock.now()).toBeGreaterThan(49_000);
    clock.clear();
  });

  it('never moves backwards', () => {
    expect(() => new BusClock().skip(-1)).toThrow(RangeError);
  });
});

describe('LocalReach', () => {
  const reaches: LocalReach[] = [];
  const nodes: AgentNode[] = [];
  afterEach(async () => {
    await Promise.all(nodes.splice(0).map((n) => n.stop({ drainTimeoutMs: 1000 })));
    for (const r of reaches.splice(0)) r.close();
  });

  function node(reach: LocalReach, agentType: string): AgentNode {
    const n = new AgentNode({ mode: 'direct', reach, descriptor: { agent_type: agentType }, handleSignals: false });
    nodes.push(n);
    return n;
  }

  it('registers by the registry rules: a bad descriptor is refused with 4104 and its field', async () => {
    const reach = new LocalReach();
    reaches.push(reach);
    const bad = node(reach, 'has spaces');
    await expect(bad.start()).rejects.toMatchObject({ code: 4104, details: { field: 'agent_type' } });
  });

  it('lists agents as GET /v1/agents does, by capability', async () => {
    const reach = new LocalReach();
    reaches.push(reach);
    const a = node(reach, 'lister').handle('list_things', () => 1);
    await a.start();
    expect(reach.agents({ capability: 'list_things' })).toMatchObject([{ agent_id: a.agentId, status: 'ONLINE', lease_valid: true }]);
    expect(reach.agents({ capability: 'other_things' })).toEqual([]);
  });

  it('honours the services REACH_* options and refuses unknown ones', () => {
    expect(new LocalReach({ env: { REACH_ACK_TIMEOUT_MS: '2500' } }).config.ackTimeoutMs).toBe(2500);
    expect(new LocalReach({ env: { REACH_ACK_TIMEOUT_MS: '2500' }, timeScale: 0.1 }).config.ackTimeoutMs).toBe(250);
    expect(() => new LocalReach({ env: { REACH_ACK_TIMEOUT: '2500' } })).toThrow(/REACH_ACK_TIMEOUT_MS/);
  });

  it('refuses invalid ReachRules with their position', () => {
    expect(() => new LocalReach({ rules: 'rules:\n  - name: x\n    when: {}\n    action: { dispatch: sideways }\n' })).toThrow(/rules\.yaml:\d+/);
  });
});

describe('the test environment in direct mode', () => {
  it('skips time: a 10 s ack deadline and the retry backoff pass at once, and the retry fails over', async () => {
    const env = await createTestEnvironment({ mode: 'direct' });
    try {
      const cap = env.uniqueCapability('hang');
      const hung = await env.startAgent({ handlers: { [cap]: () => new Promise(() => undefined) }, node: { reportProgress: false } });
      const spare = await env.startAgent({ handlers: { [cap]: async () => 'spare' } });
      const sent = await env.submit({ capability: cap, payload: {}, headers: { 'reach-preferred-agent': hung.agentId } });
      await env.waitFor(sent.message_id, (row) => row.status === 'DELIVERING');
      expect(env.reach!.config.ackTimeoutMs).toBe(10_000);
      await env.skipTime(10_000);
      expect(await env.status(sent.message_id)).toMatchObject({ status: 'PENDING', attempt: 1, code: 3002 });
      await env.skipTime(1_000); // past the backoff (200 ms ± 20 %)
      expect(await env.waitFor(sent.message_id)).toMatchObject({ status: 'DELIVERED', attempt: 1, agent_id: spare.agentId });
      expect(env.reach!.clock.skipped).toBeGreaterThanOrEqual(11_000);
    } finally {
      await env.stop({ drainTimeoutMs: 0 });
    }
  });

  it('scales the control plane time: REACH_MAX_RETRIES and the backoff hold, a hundred times faster', async () => {
    const env = await createTestEnvironment({ mode: 'direct', direct: { timeScale: 0.01, env: { REACH_MAX_RETRIES: '2' } } });
    try {
      const cap = env.uniqueCapability('fail');
      let calls = 0;
      await env.startAgent({ handlers: { [cap]: () => Promise.reject(new Error(`failure ${++calls}`)) } });
      const sent = await env.submit({ capability: cap, payload: {} });
      const row = await env.waitFor(sent.message_id);
      expect(row).toMatchObject({ status: 'DEAD', code: 3004, attempt: 2 });
      expect(calls).toBe(3);
      const delays = (await env.events(sent.message_id)).flatMap((e) =>
        e.state === 'PENDING' && e.code === 3003 ? [(e.detail as { delay_ms: number }).delay_ms] : [],
      );
      expect(delays).toHaveLength(2);
      // base 200 ms and max 4 s scaled to 2 ms and 40 ms: 2·2^0 and 2·2^1 ms, ±20 %, rounded.
      expect(delays[0]).toBeGreaterThanOrEqual(Math.round(2 * 0.8));
      expect(delays[0]).toBeLessThanOrEqual(Math.round(2 * 1.2));
      expect(delays[1]).toBeGreaterThanOrEqual(Math.round(4 * 0.8));
      expect(delays[1]).toBeLessThanOrEqual(Math.round(4 * 1.2));
    } finally {
      await env.stop();
    }
  });
});

// The routing of direct mode is @reach/routing and @reach/rules: rules, domains and saturation
// decide as in the router (the codes and the held/parked states of docs/pipeline.md).
describe('routing in direct mode', () => {
  const envs: TestEnvironment[] = [];
  afterEach(async () => {
    for (const e of envs.splice(0)) await e.stop({ drainTimeoutMs: 0 });
  });
  async function environment(direct: Parameters<typeof createTestEnvironment>[0] = {}): Promise<TestEnvironment> {
    const env = await createTestEnvironment({ mode: 'direct', ...direct });
    envs.push(env);
    return env;
  }

  it('a ReachRule broadcasts a capability to every agent, and its fallback reject refuses when nobody is there', async () => {
    const env = await environment({
      direct: {
        rules: [
          'rules:',
          '  - name: everyone_audits',
          '    when: { target_role: audit_event }',
          '    action: { dispatch: broadcast }',
          '  - name: no_waiting',
          '    when: { target_role: nobody_home }',
          '    action: { dispatch: weighted }',
          '    fallback: { if_no_available_agent: reject }',
        ].join('\n'),
      },
    });
    const one = await env.startAgent({ handlers: { audit_event: async () => 'one' } });
    const two = await env.startAgent({ handlers: { audit_event: async () => 'two' } });
    const sent = await env.submit({ capability: 'audit_event', payload: {} });
    expect(await env.waitFor(sent.message_id)).toMatchObject({ status: 'DELIVERED' });
    const routed = (await env.events(sent.message_id)).find((e) => e.state === 'ROUTED')!;
    expect(routed.detail).toMatchObject({ strategy: 'broadcast', rule: 'everyone_audits', copies_total: 2 });
    await until(() => one.received.length === 1 && two.received.length === 1);
    // Even with expire_at (which parks a message without a rule), the rule's fallback rejects at once.
    const refused = await env.submit({ capability: 'nobody_home', payload: {}, expire_at: Date.now() + 60_000 });
    expect(await env.waitFor(refused.message_id)).toMatchObject({ status: 'REJECTED', code: 2001 });
  });

  it('without a rule, a message with expire_at waits parked (PENDING 2001) and goes to the agent that appears', async () => {
    const env = await environment();
    const cap = env.uniqueCapability('later');
    const sent = await env.submit({ capability: cap, payload: {}, expire_at: Date.now() + 60_000 });
    const parked = await env.waitFor(sent.message_id, (r) => r.code === 2001);
    expect(parked).toMatchObject({ status: 'PENDING', reason: 'parked' });
    const agent = await env.startAgent({ handlers: { [cap]: async () => 'finally' } });
    expect(await env.waitFor(sent.message_id)).toMatchObject({ status: 'DELIVERED', agent_id: agent.agentId });
  });

  it('security domains: another domain is 2003 DOMAIN_DENIED until a grant opens it', async () => {
    const cap = 'read_ledger';
    const closed = await environment();
    await closed.startAgent({ handlers: { [cap]: async () => 'ledger' }, descriptor: { metadata: { domain: 'finance' } } });
    const denied = await closed.submit({ capability: cap, payload: {} });
    expect(await closed.waitFor(denied.message_id)).toMatchObject({ status: 'REJECTED', code: 2003 });

    const granted = await environment({ direct: { grants: [{ from_domain: 'default', to_domain: 'finance', capability: cap }] } });
    await granted.startAgent({ handlers: { [cap]: async () => 'ledger' }, descriptor: { metadata: { domain: 'finance' } } });
    const allowed = await granted.submit({ capability: cap, payload: {} }, { waitMs: 5_000 });
    expect(allowed).toMatchObject({ status: 'DELIVERED', result: { payload: 'ledger' } });
  });

  it('saturation: an agent whose heartbeat reports it full holds new work (PENDING 2002 held) until it has room', async () => {
    const env = await environment();
    const cap = env.uniqueCapability('busy');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const agent = await env.startAgent({ handlers: { [cap]: () => gate.then(() => 'done') }, descriptor: { metadata: { max_concurrency: 1 }, ttl_s: 2 } });
    const first = await env.submit({ capability: cap, payload: 1 });
    await env.waitFor(first.message_id, (r) => r.status === 'DELIVERING');
    // The next heartbeat (every ttl/2 = 1 s) reports load 1 of 1: above REACH_SATURATION (0.8).
    await until(() => env.reach!.agents({ capability: cap })[0]?.load?.current_load === 1, 5_000);
    const second = await env.submit({ capability: cap, payload: 2 });
    expect(await env.waitFor(second.message_id, (r) => r.code === 2002)).toMatchObject({ status: 'PENDING', agent_id: null });
    release();
    expect(await env.waitFor(second.message_id)).toMatchObject({ status: 'DELIVERED', agent_id: agent.agentId, attempt: 0 });
  });

  it('QUEUE_REQUEST: a sender that will not wait gets 2002 SATURATED at once', async () => {
    const env = await environment();
    const cap = env.uniqueCapability('full');
    await env.startAgent({ handlers: { [cap]: () => new Promise(() => undefined) }, descriptor: { metadata: { max_concurrency: 1 }, ttl_s: 2 } });
    await env.submit({ capability: cap, payload: 1 });
    await until(() => env.reach!.agents({ capability: cap })[0]?.load?.current_load === 1, 5_000);
    const refused = await env.submit({ capability: cap, payload: 2, headers: { 'reach-on-saturation': 'QUEUE_REQUEST' } });
    expect(await env.waitFor(refused.message_id)).toMatchObject({ status: 'REJECTED', code: 2002 });
  });

  it('AGENT_REACH_MODE=direct without a LocalReach: the nodes of one process share LocalReach.shared()', async () => {
    const cap = `shared_${Date.now().toString(36)}`;
    const previous = process.env.AGENT_REACH_MODE;
    process.env.AGENT_REACH_MODE = 'direct';
    const server = new AgentNode({ descriptor: { agent_type: 'server' }, handleSignals: false });
    const client = new AgentNode({ descriptor: { agent_type: 'client' }, handleSignals: false });
    try {
      server.handle(cap, async (m: ReachMessage<number>) => m.payload! + 1);
      await server.start();
      await client.start();
      expect(await client.request(cap, 41)).toBe(42);
      expect(
        LocalReach.shared()
          .agents({ capability: cap })
          .map((a) => a.agent_id),
      ).toEqual([server.agentId]);
    } finally {
      await Promise.all([server.stop(), client.stop()]);
      if (previous === undefined) delete process.env.AGENT_REACH_MODE;
      else process.env.AGENT_REACH_MODE = previous;
    }
  });
});

async function until(probe: () => boolean, timeoutMs = 2_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

// Pre-flight from a local view (R-G6): the node keeps the `routes` view its dispatcher
// pushes over its socket (here the LocalReach's) and refuses without asking anyone.
describe('pre-flight from the local routes view', () => {
  const envs: TestEnvironment[] = [];
  afterEach(async () => {
    for (const e of envs.splice(0)) await e.stop({ drainTimeoutMs: 0 });
  });

  it('refuses 2001 and 2003 from the view, without a registry call or a message; allows what is routable', async () => {
    const env = await createTestEnvironment({ mode: 'direct' });
    envs.push(env);
    await env.startAgent({
      handlers: { read_ledger: async () => 'ledger' },
      subscriptions: { ledger_changed: async () => undefined },
      descriptor: { metadata: { domain: 'finance' } },
    });
    await env.startAgent({ handlers: { echo_text: async (m: ReachMessage) => m.payload } });
    // Registered, never connected: known to the view, not routable.
    env.reach!.register({ agent_type: 'absent', capabilities: ['absent_thing'] });
    const caller = await env.startAgent();
    await until(() => caller.node.routeVerdict('echo_text') === 0);
    expect(caller.node.routeVerdict('read_ledger')).toBe(2003);
    expect(caller.node.routeVerdict('ledger_changed', 'topic')).toBe(2003);
    expect(caller.node.routeVerdict('absent_thing')).toBe(2001);

    const registryCalls = vi.spyOn(env.reach!, 'agents');
    await expect(caller.node.request('read_ledger', {})).rejects.toMatchObject({ code: 2003, details: { preflight: 'local' } });
    await expect(caller.node.request('absent_thing', {})).rejects.toMatchObject({ code: 2001, details: { preflight: 'local' } });
    await expect(caller.node.send({ capability: 'read_ledger', payload: {} }, { preflight: true })).rejects.toMatchObject({ code: 2003 });
    await expect(caller.node.publish('ledger_changed', {}, { preflight: true })).rejects.toMatchObject({ code: 2003 });
    expect(registryCalls).not.toHaveBeenCalled();
    expect(await caller.node.request('echo_text', 'hi')).toBe('hi');

    // A name the view does not hold may be an agent that registered a moment ago: the registry is asked.
    expect(caller.node.routeVerdict('nobody_here')).toBeUndefined();
    await expect(caller.node.request('nobody_here', {})).rejects.toMatchObject({ code: 2001, details: { capability: 'nobody_here' } });
    expect(registryCalls).toHaveBeenCalledTimes(1);

    // Sent anyway (pre-flight off for this call), the router refuses it with the same code.
    await expect(caller.node.request('read_ledger', {}, { preflight: false, timeoutMs: 5_000 })).rejects.toMatchObject({ code: 2003 });
  });

  it('follows changes: an agent that connects makes its name 0; one that drops its connection, 2001 after the reconnect grace', async () => {
    const env = await createTestEnvironment({ mode: 'direct', direct: { env: { REACH_WS_RECONNECT_GRACE_MS: '0' } } });
    envs.push(env);
    const caller = await env.startAgent();
    expect(caller.node.routeVerdict('late_comer')).toBeUndefined();
    const agent = await env.startAgent({ handlers: { late_comer: async () => 'here' }, node: { reconnect: { baseMs: 60_000 } } });
    await until(() => caller.node.routeVerdict('late_comer') === 0);
    env.reach!.dropConnection(agent.agentId);
    await until(() => caller.node.routeVerdict('late_comer') === 2001);
    await agent.stop();
    await until(() => caller.node.routeVerdict('late_comer') === undefined);
  });

  it('a view that is not complete refuses nothing: a dropped connection forgets it until the next full view', async () => {
    const env = await createTestEnvironment({ mode: 'direct' });
    envs.push(env);
    await env.startAgent({ handlers: { audit_books: async () => 'books' }, descriptor: { metadata: { domain: 'finance' } } });
    const caller = await env.startAgent();
    expect([caller.node.routesView, caller.node.routeVerdict('audit_books')]).toEqual(['ready', 2003]);
    const disconnected = new Promise<void>((resolve) => caller.node.on('disconnected', () => resolve()));
    env.reach!.dropConnection(caller.agentId);
    await disconnected;
    expect([caller.node.routesView, caller.node.routeVerdict('audit_books')]).toEqual(['waiting', undefined]);
    // No view: the registry is asked (it lists the agent), the request goes out once reconnected, and the router refuses it.
    await expect(caller.node.request('audit_books', {}, { timeoutMs: 10_000 })).rejects.toMatchObject({ code: 2003, details: { status: 'REJECTED' } });
    await until(() => caller.node.routeVerdict('audit_books') === 2003);
    expect(caller.node.routesView).toBe('ready');
  });

  it('send() with expire_at may wait: not refused for 2001 (the router parks it), still refused for 2003', async () => {
    const env = await createTestEnvironment({ mode: 'direct' });
    envs.push(env);
    await env.startAgent({ handlers: { audit_books: async () => 'books' }, descriptor: { metadata: { domain: 'finance' } } });
    env.reach!.register({ agent_type: 'absent', capabilities: ['absent_thing'] });
    const caller = await env.startAgent();
    await until(() => caller.node.routeVerdict('absent_thing') === 2001);
    const expireAt = Date.now() + 60_000;
    await expect(caller.node.send({ capability: 'absent_thing', payload: {} }, { preflight: true })).rejects.toMatchObject({ code: 2001 });
    const parked = await caller.node.send({ capability: 'absent_thing', payload: {}, expire_at: expireAt }, { preflight: true });
    expect(await env.waitFor(parked, (r) => r.code === 2001)).toMatchObject({ status: 'PENDING' });
    await expect(caller.node.send({ capability: 'audit_books', payload: {}, expire_at: expireAt }, { preflight: true })).rejects.toMatchObject({
      code: 2003,
      details: { preflight: 'local' },
    });
  });

  it('can be turned off: no view, requests go out and the router decides', async () => {
    const env = await createTestEnvironment({ mode: 'direct' });
    envs.push(env);
    const caller = await env.startAgent({ node: { preflight: false } });
    expect([caller.node.routesView, caller.node.routeVerdict('anything_at_all')]).toEqual(['off', undefined]);
    await expect(caller.node.request('anything_at_all', {}, { timeoutMs: 5_000 })).rejects.toMatchObject({ code: 2001, details: { status: 'REJECTED' } });
  });
});
