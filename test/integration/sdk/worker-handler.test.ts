import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { workerHandler, type RegistryApi } from '@reach/sdk';
import { createTestEnvironment, type TestEnvironment } from '@reach/sdk/testing';

// R-G1, blocking handlers, against the real stack: a CPU-bound handler run by workerHandler()
// spins 5 s in its thread while the node heartbeats the registry (a 2 s lease: a starved node
// would lose it), answers and acks other deliveries through the dispatcher, and sends the
// progress frames that keep the busy message's 1.5 s ack window open. The same test in direct
// mode: test/unit/sdk/worker-handler.test.ts.

const FIXTURE = new URL('../../unit/sdk/fixtures/busy-work.mjs', import.meta.url);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let env: TestEnvironment;
beforeEach(async () => {
  env = await createTestEnvironment({ mode: 'queued' });
});
afterEach(() => env.stop());

describe('workerHandler (R-G1) on the stack', () => {
  it('[blocking-sync-handler] a 5 s busy loop in a worker: heartbeats and acks go on meanwhile, progress keeps its 1.5 s ack window open', async () => {
    const crunch = workerHandler(FIXTURE, 'busy');
    const crunchCap = env.uniqueCapability('crunch');
    const echoCap = env.uniqueCapability('echo');
    try {
      const agent = await env.startAgent({ handlers: { [crunchCap]: crunch, [echoCap]: async (m) => m.payload }, descriptor: { ttl_s: 2 } });
      // The node's own registry client: every heartbeat it sends goes through it.
      const heartbeats = vi.spyOn((agent.node as unknown as { registry: RegistryApi }).registry, 'heartbeat');
      const slow = await env.submit({ capability: crunchCap, payload: { ms: 5_000 }, timeout_ms: 1_500 });
      await env.waitFor(slow.message_id, (r) => r.status === 'DELIVERING');
      const beatsBefore = heartbeats.mock.calls.length;
      for (let i = 0; i < 4; i++) {
        expect(await env.submit({ capability: echoCap, payload: i }, { waitMs: 10_000 })).toMatchObject({ status: 'DELIVERED', result: { payload: i } });
        await sleep(500);
      }
      // Still spinning in its thread while the node answered the others and heartbeated (every 1 s).
      expect(await env.status(slow.message_id)).toMatchObject({ status: 'DELIVERING', attempt: 0 });
      expect(heartbeats.mock.calls.length - beatsBefore).toBeGreaterThanOrEqual(2);
      // …and the registry took them: none was refused (a refused one would re-register the agent).
      await Promise.all(heartbeats.mock.results.map((r) => r.value as Promise<unknown>));
      // The result is stored with the row (the tracker may write the status a moment before it).
      const done = await env.waitFor(
        slow.message_id,
        (r) => r.status === 'REJECTED' || r.status === 'DEAD' || (r.status === 'DELIVERED' && r.result !== undefined),
      );
      expect(done).toMatchObject({ status: 'DELIVERED', attempt: 0, result: { status: 'ok', payload: { spun: true, ms: 5_000 } } });
      expect(agent.received.filter((m) => m.message_id === slow.message_id)).toHaveLength(1);
    } finally {
      await crunch.close();
    }
  }, 60_000);
});
