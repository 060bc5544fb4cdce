import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { workerHandler } from '@reach/sdk';
import { createTestEnvironment, type TestEnvironment } from '@reach/sdk/testing';

// R-G1, blocking handlers: a CPU-bound handler run by workerHandler() leaves the node's event
// loop free — heartbeats go on, other deliveries are acked, progress keeps a short ack window
// open — while it spins for 5 s. Direct mode: no stack needed.

const FIXTURE = new URL('./fixtures/busy-work.mjs', import.meta.url);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let env: TestEnvironment;
beforeEach(async () => {
  env = await createTestEnvironment({ mode: 'direct' });
});
afterEach(() => env.stop());

describe('workerHandler (R-G1)', () => {
  it('[blocking-sync-handler] a 5 s busy loop in a worker: heartbeats and acks go on meanwhile, progress keeps its 1.5 s ack window open', async () => {
    const heartbeats = vi.spyOn(env.reach!, 'heartbeat');
    const crunch = workerHandler(FIXTURE, 'busy');
    try {
      await env.startAgent({ handlers: { crunch_numbers: crunch, echo_text: async (m) => m.payload }, descriptor: { ttl_s: 2 } });
      const slow = await env.submit({ capability: 'crunch_numbers', payload: { ms: 5_000 }, timeout_ms: 1_500 });
      await env.waitFor(slow.message_id, (r) => r.status === 'DELIVERING');
      const beatsBefore = heartbeats.mock.calls.length;
      for (let i = 0; i < 4; i++) {
        expect(await env.submit({ capability: 'echo_text', payload: i }, { waitMs: 2_000 })).toMatchObject({ status: 'DELIVERED', result: { payload: i } });
        await sleep(500);
      }
      // Still spinning in its thread while the node answered the others and heartbeated (every 1 s).
      expect(await env.status(slow.message_id)).toMatchObject({ status: 'DELIVERING', attempt: 0 });
      expect(heartbeats.mock.calls.length - beatsBefore).toBeGreaterThanOrEqual(2);
      const done = await env.waitFor(slow.message_id);
      expect(done).toMatchObject({ status: 'DELIVERED', attempt: 0, result: { status: 'ok', payload: { spun: true, ms: 5_000 } } });
    } finally {
      await crunch.close();
    }
  }, 30_000);

  it('an error thrown in the thread keeps its code and retryable flag', async () => {
    const refuse = workerHandler(FIXTURE, 'refuse');
    try {
      await env.startAgent({ handlers: { check_input: refuse } });
      const sent = await env.submit({ capability: 'check_input', payload: {} });
      expect(await env.waitFor(sent.message_id)).toMatchObject({ status: 'REJECTED', code: 3003, attempt: 0 });
      const rejected = (await env.events(sent.message_id)).find((e) => e.state === 'REJECTED')!;
      expect(rejected.detail).toMatchObject({ agent_code: 4101, retryable: false });
    } finally {
      await refuse.close();
    }
  });
});
