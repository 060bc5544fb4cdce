import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ReachMessage } from '@reach/sdk';
import { createTestEnvironment, type TestEnvironment } from '@reach/sdk/testing';
import { SCENARIOS } from '../../helpers/sdk-scenarios.js';

// The SDK scenarios (docs/sdk-scenarios.md) in direct mode: no Kafka, PostgreSQL, Redis or
// services — the same test code as test/integration/sdk/sdk-scenarios-queued.test.ts.

let env: TestEnvironment;
beforeEach(async () => {
  env = await createTestEnvironment({ mode: 'direct' });
});
afterEach(() => env.stop());

describe('SDK scenarios, direct mode', () => {
  it('[deliver-ack] a capability message is handled, answered and acked: DELIVERED with the result', () => SCENARIOS['deliver-ack'](env));
  it('[request-result] request() returns the result and the context fragments the handler set', () => SCENARIOS['request-result'](env));
  it('[reject-retryable] a retryable failure is retried after the backoff until it succeeds', () => SCENARIOS['reject-retryable'](env));
  it('[reject-non-retryable] a NonRetryableError is final: REJECTED 3003 and a receipt', () => SCENARIOS['reject-non-retryable'](env));
  it('[no-route] nobody offers it: 2001 at pre-flight, and REJECTED 2001 when sent anyway', () => SCENARIOS['no-route'](env));
  it('[sticky-session] messages of one session go to one agent', () => SCENARIOS['sticky-session'](env));
  it('[publish-fanout] every subscriber gets its copy; the publish ends DELIVERED, no receipt', () => SCENARIOS['publish-fanout'](env));
  it('[publish-no-subscriber] a publish nobody hears: REJECTED 2001 and the receipt', () => SCENARIOS['publish-no-subscriber'](env));
  it('[ack-timeout-retry] a missed ack deadline fails the attempt (3002); the retry goes to another agent', () => SCENARIOS['ack-timeout-retry'](env));
  it('[redelivery-deduped] a redelivery of a running message is answered when it ends; the handler runs once', () => SCENARIOS['redelivery-deduped'](env));
  it('[long-handler-progress] a handler 3x its ack window runs once, kept alive by progress', () => SCENARIOS['long-handler-progress'](env));
  it('[refusal-keeps-health] refusals leave the agent ONLINE at health 1', () => SCENARIOS['refusal-keeps-health'](env));
  it('[duplicate-4001] a second connection of the agent takes over; the first stops with AgentReplacedError', () => SCENARIOS['duplicate-4001'](env));
  it('[preflight-local] pre-flight refuses from the local view (2003) without sending; what is routable goes', () => SCENARIOS['preflight-local'](env));
});

// Scenarios whose queued runs need the stack's own tools (a chaos proxy between node and
// dispatcher, SIGKILL, token lifetimes): in direct mode the LocalReach injects the same faults.
describe('SDK scenarios, direct mode, with faults of the LocalReach', () => {
  it('[dedupe-redelivery] the answer is lost: the redelivery is answered from the earlier result, the handler runs once', async () => {
    const cap = env.uniqueCapability('charge');
    let runs = 0;
    const agent = await env.startAgent({ handlers: { [cap]: async () => ({ run: ++runs }) } });
    env.reach!.loseAnswers(agent.agentId, 1);
    const key = `key-${cap}`;
    const sent = await env.submit({ capability: cap, payload: {}, timeout_ms: 1_000 }, { idempotencyKey: key });
    await until('the first run', () => runs === 1);
    await env.skipTime(1_000); // the ack deadline passes: attempt 0 failed (3002)
    await env.skipTime(1_000); // past the backoff: delivered again, to the only agent
    const row = await env.waitFor(sent.message_id);
    expect(row).toMatchObject({ status: 'DELIVERED', attempt: 1, agent_id: agent.agentId, result: { status: 'ok', payload: { run: 1 } } });
    expect(runs).toBe(1);
    expect(agent.received).toHaveLength(1);
    const again = await env.submit({ capability: cap, payload: {} }, { idempotencyKey: key, waitMs: 5_000 });
    expect(again).toMatchObject({ message_id: sent.message_id, result: { payload: { run: 1 } } });
  });

  it('[reconnect-replay] the connection dies with deliveries on the way: the node reconnects, nothing is lost, seqs have no gap', async () => {
    const cap = env.uniqueCapability('count');
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const seen: Array<{ seq: number; i: number }> = [];
    const agent = await env.startAgent({
      handlers: { [cap]: async (m: ReachMessage<{ i: number }>, ctx) => (seen.push({ seq: ctx.seq, i: m.payload!.i }), gate.then(() => m.payload!.i)) },
      descriptor: { metadata: { max_concurrency: 1 } },
      node: { reconnect: { baseMs: 50, maxMs: 200 } },
    });
    const disconnects: number[] = [];
    const reconnected = new Promise<void>((resolve) => agent.node.on('connected', () => resolve()));
    agent.node.on('disconnected', (d) => disconnects.push(d.code));
    const ids: string[] = [];
    for (const i of [0, 1]) ids.push((await env.submit({ capability: cap, payload: { i } })).message_id);
    for (const id of ids) await env.waitFor(id, (r) => r.status === 'DELIVERING');
    expect(env.reach!.dropConnection(agent.agentId)).toBe(true);
    for (const i of [2, 3]) ids.push((await env.submit({ capability: cap, payload: { i } })).message_id);
    await reconnected;
    open();
    for (const id of ids) expect(await env.waitFor(id)).toMatchObject({ status: 'DELIVERED', attempt: 0, agent_id: agent.agentId });
    // Replayed in seq order with no gap, nothing lost. Which of the two messages sent while the
    // node was away got the lower seq is the order they were routed in, which nothing promises for
    // independent messages (a fresh clone once saw 0, 1, 3, 2 with seqs 1–4).
    expect(seen.map((s) => s.seq)).toEqual([1, 2, 3, 4]);
    expect(seen.slice(0, 2).map((s) => s.i)).toEqual([0, 1]);
    expect(seen.map((s) => s.i).sort()).toEqual([0, 1, 2, 3]);
    expect(disconnects).toEqual([1006]);
  });
});

async function until(what: string, probe: () => boolean): Promise<void> {
  for (let i = 0; !probe(); i++) {
    if (i > 1000) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
