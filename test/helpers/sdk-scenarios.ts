import { expect } from 'vitest';
import { AgentReplacedError, NonRetryableError, type ReachMessage, type Receipt } from '@reach/sdk';
import { uniqueName, type TestEnvironment } from '@reach/sdk/testing';

/**
 * One list of SDK scenarios, written once against `TestEnvironment` and run in both modes:
 * `direct` (test/unit/sdk/sdk-scenarios-direct.test.ts, no infrastructure) and `queued`
 * (test/integration/sdk/sdk-scenarios-queued.test.ts, the real stack). Each test file names
 * every scenario it runs as `[id]` (docs/sdk-scenarios.md; test/unit/sdk/parity.test.ts checks
 * the four runs). The same assertions must hold in both modes: where direct mode differed from
 * the pipeline, one of these fails.
 */
export type Scenario = (env: TestEnvironment) => Promise<void>;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The states of a timeline, in order, as `state[:code]@attempt`. */
async function states(env: TestEnvironment, messageId: string): Promise<string[]> {
  return (await env.events(messageId)).map((e) => `${e.state}${e.code === null ? '' : `:${e.code}`}@${e.attempt}`);
}

async function until(what: string, probe: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

export const SCENARIOS = {
  /** A message to a capability reaches its handler, is answered and acked: DELIVERED with the result. */
  'deliver-ack': async (env) => {
    const cap = env.uniqueCapability('double');
    const agent = await env.startAgent({ handlers: { [cap]: async (m: ReachMessage<{ n: number }>) => ({ doubled: m.payload!.n * 2 }) } });
    const out = await env.submit({ capability: cap, payload: { n: 21 } }, { waitMs: 15_000 });
    expect(out).toMatchObject({ status: 'DELIVERED', result: { status: 'ok', payload: { doubled: 42 } } });
    expect(agent.received.map((m) => m.message_id)).toEqual([out.message_id]);
    const row = await env.waitFor(out.message_id);
    expect(row).toMatchObject({ status: 'DELIVERED', attempt: 0, agent_id: agent.agentId });
    expect(await states(env, out.message_id)).toEqual(['PENDING@0', 'ROUTED@0', 'DELIVERING@0', 'DELIVERED@0']);
  },

  /** request() from one agent to another returns the handler's result and the context fragments it set. */
  'request-result': async (env) => {
    const cap = env.uniqueCapability('plan');
    await env.startAgent({
      handlers: {
        [cap]: async (m: ReachMessage<{ goal: string }>, ctx) => {
          const user = ctx.session.getJson<{ name: string }>('user');
          ctx.session.setJson('plan', [`greet ${user?.name ?? '?'}`, m.payload!.goal]);
          return { ok: true, session: ctx.session.id };
        },
      },
    });
    const caller = await env.startAgent();
    const reply = await caller.node.requestReply<{ ok: boolean; session: string }>(
      cap,
      { goal: 'rome' },
      { context: { user: JSON.stringify({ name: 'ada' }) }, sessionId: 's-1', timeoutMs: 15_000 },
    );
    expect(reply.payload).toEqual({ ok: true, session: 's-1' });
    expect(JSON.parse(reply.context.plan!)).toEqual(['greet ada', 'rome']);
    expect(Object.keys(reply.updated)).toEqual(['plan']);
    expect(reply.message).toMatchObject({ message_type: 'task_result', correlation_id: expect.any(String) as string });
  },

  /** A retryable failure is attempted again, after the backoff, until it succeeds. */
  'reject-retryable': async (env) => {
    const cap = env.uniqueCapability('flaky');
    let calls = 0;
    const agent = await env.startAgent({
      handlers: {
        [cap]: async () => {
          calls += 1;
          if (calls < 3) throw new Error(`transient failure ${calls}`);
          return { calls };
        },
      },
    });
    const sent = await env.submit({ capability: cap, payload: {} });
    const row = await env.waitFor(sent.message_id);
    expect(row).toMatchObject({ status: 'DELIVERED', attempt: 2, agent_id: agent.agentId });
    expect(calls).toBe(3);
    const timeline = await states(env, sent.message_id);
    expect(timeline.filter((s) => s.startsWith('PENDING:3003'))).toEqual(['PENDING:3003@1', 'PENDING:3003@2']);
    expect(timeline.at(-1)).toBe('DELIVERED@2');
  },

  /** A NonRetryableError rejects the message once, for good; the requester gets the failure receipt's code. */
  'reject-non-retryable': async (env) => {
    const cap = env.uniqueCapability('validate');
    let calls = 0;
    await env.startAgent({
      handlers: {
        [cap]: async () => {
          calls += 1;
          throw new NonRetryableError('INVALID_ENVELOPE', 'field x is missing');
        },
      },
    });
    const caller = await env.startAgent();
    const receipts: Receipt[] = [];
    caller.node.on('receipt', (r) => receipts.push(r));
    const err = await caller.node.request(cap, {}, { timeoutMs: 15_000 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 3003 });
    expect(String((err as Error).message)).toContain('field x is missing');
    expect(calls).toBe(1);
    const about = receipts[0]!.message_id;
    expect(receipts).toMatchObject([{ status: 'REJECTED', code: 3003 }]);
    const row = await env.waitFor(about);
    expect(row).toMatchObject({ status: 'REJECTED', code: 3003, attempt: 0 });
  },

  /** Nobody offers the capability: pre-flight fails at once with 2001; sent anyway, REJECTED 2001 with a receipt. */
  'no-route': async (env) => {
    const cap = env.uniqueCapability('nobody');
    const caller = await env.startAgent();
    await expect(caller.node.request(cap, {})).rejects.toMatchObject({ code: 2001 });
    await expect(caller.node.request(cap, {}, { preflight: false, timeoutMs: 15_000 })).rejects.toMatchObject({ code: 2001 });
    const sent = await env.submit({ capability: cap, payload: {} });
    const row = await env.waitFor(sent.message_id);
    expect(row).toMatchObject({ status: 'REJECTED', code: 2001 });
    expect(await states(env, sent.message_id)).toEqual(['PENDING@0', 'REJECTED:2001@0']);
  },

  /** Messages of one session stick to the agent the first one went to (R-B6). */
  'sticky-session': async (env) => {
    const cap = env.uniqueCapability('chat');
    const a = await env.startAgent({ handlers: { [cap]: async () => 'a' } });
    const b = await env.startAgent({ handlers: { [cap]: async () => 'b' } });
    const answers: unknown[] = [];
    for (let i = 0; i < 6; i++) {
      const out = await env.submit({ capability: cap, payload: { i }, session_id: 'conversation-1' }, { waitMs: 15_000 });
      answers.push((out.result as { payload: unknown }).payload);
    }
    expect(new Set(answers).size).toBe(1);
    expect(a.received.length + b.received.length).toBe(6);
  },

  /** publish(): every subscriber gets its copy, DELIVERED on its own id; the published message ends DELIVERED. */
  'publish-fanout': async (env) => {
    const topic = env.uniqueCapability('changed');
    const one = await env.startAgent({ subscriptions: { [topic]: async () => undefined } });
    const two = await env.startAgent({ subscriptions: { [topic]: async () => undefined } });
    const publisher = await env.startAgent();
    const receipts: Receipt[] = [];
    publisher.node.on('receipt', (r) => receipts.push(r));
    const id = await publisher.node.publish(topic, { v: 1 });
    expect(await env.waitFor(id)).toMatchObject({ status: 'DELIVERED' });
    await until('both copies', () => one.received.length === 1 && two.received.length === 1);
    for (const copy of [one.received[0]!, two.received[0]!]) {
      expect(copy.message_id).not.toBe(id);
      expect(copy.payload).toEqual({ v: 1 });
      expect(await env.waitFor(copy.message_id)).toMatchObject({ status: 'DELIVERED', parent_message_id: id });
    }
    expect(receipts).toEqual([]);
  },

  /** publish() to a topic nobody subscribes to: REJECTED 2001, and the publisher gets that receipt. */
  'publish-no-subscriber': async (env) => {
    const topic = env.uniqueCapability('unheard');
    const publisher = await env.startAgent();
    const receipts: Receipt[] = [];
    publisher.node.on('receipt', (r) => receipts.push(r));
    const id = await publisher.node.publish(topic, { v: 1 });
    expect(await env.waitFor(id)).toMatchObject({ status: 'REJECTED', code: 2001 });
    await until('the receipt', () => receipts.length === 1);
    expect(receipts[0]).toMatchObject({ message_id: id, status: 'REJECTED', code: 2001 });
  },

  /**
   * The ack deadline passes (a handler that outlives its message's timeout_ms, progress off):
   * the attempt fails with 3002 and the retry goes to another agent, which answers.
   */
  'ack-timeout-retry': async (env) => {
    const cap = env.uniqueCapability('slow');
    const stuck = await env.startAgent({ handlers: { [cap]: () => sleep(3_000).then(() => 'late') }, node: { reportProgress: false } });
    const spare = await env.startAgent({ handlers: { [cap]: async () => 'spare' } });
    const sent = await env.submit({ capability: cap, payload: {}, timeout_ms: 600, headers: { 'reach-preferred-agent': stuck.agentId } });
    const row = await env.waitFor(sent.message_id);
    expect(row).toMatchObject({ status: 'DELIVERED', attempt: 1, agent_id: spare.agentId });
    const timeline = await env.events(sent.message_id);
    expect(timeline.find((e) => e.state === 'PENDING' && e.code === 3002)).toMatchObject({ attempt: 1, agent_id: stuck.agentId });
    expect(stuck.received).toHaveLength(1);
    expect(spare.received).toHaveLength(1);
  },

  /**
   * A redelivery of a message the node is still running (its ack deadline passed at 600 ms, the
   * retry came back to the only agent after the backoff) is deduped: answered when the first run
   * ends at 1 s — before the redelivery's own deadline — so the handler runs once.
   */
  'redelivery-deduped': async (env) => {
    const cap = env.uniqueCapability('think');
    let runs = 0;
    const agent = await env.startAgent({
      handlers: {
        [cap]: async () => {
          runs += 1;
          await sleep(1_000);
          return { runs };
        },
      },
      node: { reportProgress: false },
    });
    const sent = await env.submit({ capability: cap, payload: {}, timeout_ms: 600 });
    const row = await env.waitFor(sent.message_id);
    expect(row).toMatchObject({ status: 'DELIVERED', attempt: 1, agent_id: agent.agentId });
    expect(runs).toBe(1);
    expect(agent.received).toHaveLength(1);
    expect(await states(env, sent.message_id)).toContain('PENDING:3002@1');
  },

  /** A handler several times longer than its ack window runs once, on one agent, thanks to progress frames. */
  'long-handler-progress': async (env) => {
    const cap = env.uniqueCapability('summarize');
    let runs = 0;
    const one = await env.startAgent({ handlers: { [cap]: () => ((runs += 1), sleep(3_000).then(() => 'done')) } });
    const two = await env.startAgent({ handlers: { [cap]: () => ((runs += 1), sleep(3_000).then(() => 'done')) } });
    const sent = await env.submit({ capability: cap, payload: {}, timeout_ms: 1_000 });
    const row = await env.waitFor(sent.message_id);
    expect(row).toMatchObject({ status: 'DELIVERED', attempt: 0 });
    expect(runs).toBe(1);
    expect(one.received.length + two.received.length).toBe(1);
  },

  /** A NonRetryableError does not lower the health the node reports: the agent stays ONLINE and routable. */
  'refusal-keeps-health': async (env) => {
    const cap = env.uniqueCapability('check');
    const agent = await env.startAgent({ handlers: { [cap]: async () => Promise.reject(new NonRetryableError('INVALID_ENVELOPE', 'bad input')) } });
    // A waited-for message that failed answers with its own code (ingress's `?wait_ms=`).
    for (let i = 0; i < 2; i++) await expect(env.submit({ capability: cap, payload: { i } }, { waitMs: 15_000 })).rejects.toMatchObject({ code: 3003 });
    expect(agent.node.load().health).toBe(1);
    const listed = await env.agents({ capability: cap });
    expect(listed).toMatchObject([{ agent_id: agent.agentId, status: 'ONLINE' }]);
  },

  /** A second connection of the same agent takes over (4001): the older node stops, AgentReplacedError, no turns. */
  'duplicate-4001': async (env) => {
    const cap = env.uniqueCapability('own');
    const first = await env.startAgent({ handlers: { [cap]: async () => 'first' } });
    // Caught at once: run() rejects while the second node starts.
    const ended = first.node.run().then(
      () => 'resolved',
      (err: unknown) => err,
    );
    const second = env.node({ descriptor: { agent_type: 'dup', agent_id: first.agentId } });
    second.handle(cap, async () => 'second');
    await second.start();
    expect(await ended).toBeInstanceOf(AgentReplacedError);
    expect(first.node.replaced).toBe(true);
    const out = await env.submit({ capability: cap, payload: {} }, { waitMs: 15_000 });
    expect(out).toMatchObject({ status: 'DELIVERED', result: { payload: 'second' } });
  },

  /**
   * Pre-flight from the node's local routes view (R-G6): request(), send() and publish()
   * refuse what the router would refuse (here 2003, a domain no grant opens) without sending;
   * what is routable goes and is delivered; sent anyway, the router refuses with the same code.
   */
  'preflight-local': async (env) => {
    const ledger = env.uniqueCapability('read');
    const news = env.uniqueCapability('news');
    const echo = env.uniqueCapability('echo');
    await env.startAgent({
      handlers: { [ledger]: async () => 'ledger' },
      subscriptions: { [news]: async () => undefined },
      descriptor: { metadata: { domain: uniqueName('finance') } },
    });
    await env.startAgent({ handlers: { [echo]: async (m) => m.payload } });
    const caller = await env.startAgent();
    // startAgent returned once routing and the caller's own view agreed on the agents before it.
    expect([caller.node.routeVerdict(echo), caller.node.routeVerdict(ledger), caller.node.routeVerdict(news, 'topic')]).toEqual([0, 2003, 2003]);
    await expect(caller.node.request(ledger, {})).rejects.toMatchObject({ code: 2003, details: { preflight: 'local' } });
    await expect(caller.node.send({ capability: ledger, payload: {} }, { preflight: true })).rejects.toMatchObject({
      code: 2003,
      details: { preflight: 'local' },
    });
    await expect(caller.node.publish(news, {}, { preflight: true })).rejects.toMatchObject({ code: 2003, details: { preflight: 'local' } });
    expect(await caller.node.request(echo, 'asked', { timeoutMs: 15_000 })).toBe('asked');
    const sent = await caller.node.send({ capability: echo, payload: 'sent' }, { preflight: true });
    expect(await env.waitFor(sent)).toMatchObject({ status: 'DELIVERED' });
    await expect(caller.node.request(ledger, {}, { preflight: false, timeoutMs: 15_000 })).rejects.toMatchObject({
      code: 2003,
      details: { status: 'REJECTED' },
    });
  },
} satisfies Record<string, Scenario>;

export type ScenarioId = keyof typeof SCENARIOS;
