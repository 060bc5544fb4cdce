import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestEnvironment, type TestEnvironment } from '@reach/sdk/testing';
import { capability, echoAgent } from '../../../examples/dist/echo-agent.js';

// The echo example's agent in direct mode: the agent code as it ships, no stack. (As a process
// of its own against the stack: test/integration/sdk/echo-example.test.ts.)

let env: TestEnvironment;
beforeEach(async () => {
  env = await createTestEnvironment({ mode: 'direct' });
});
afterEach(() => env.stop());

describe('examples/echo-agent in direct mode', () => {
  it('answers a request with what it got and its own id', async () => {
    const echo = echoAgent({ mode: 'direct', reach: env.reach, handleSignals: false });
    await echo.start();
    try {
      const caller = await env.startAgent();
      expect(await caller.node.request(capability, { hello: 'world' })).toEqual({ echo: { hello: 'world' }, by: echo.agentId });
    } finally {
      await echo.stop();
    }
  });

  it('is DELIVERED with its result, through the same states as on the stack', async () => {
    const echo = echoAgent({ mode: 'direct', reach: env.reach, handleSignals: false });
    await echo.start();
    try {
      const out = await env.submit({ capability, payload: [1, 2] }, { waitMs: 5_000 });
      expect(out).toMatchObject({ status: 'DELIVERED', agent_id: echo.agentId, result: { status: 'ok', payload: { echo: [1, 2], by: echo.agentId } } });
      expect((await env.events(out.message_id)).map((e) => e.state)).toEqual(['PENDING', 'ROUTED', 'DELIVERING', 'DELIVERED']);
    } finally {
      await echo.stop();
    }
  });
});
