import { afterEach, beforeEach, describe, it } from 'vitest';
import { createTestEnvironment, type TestEnvironment } from '@reach/sdk/testing';
import { SCENARIOS } from '../../helpers/sdk-scenarios.js';

// The SDK scenarios (docs/sdk-scenarios.md) in queued mode: through the real stack (Kafka,
// PostgreSQL, Redis, the services) — the same test code as test/unit/sdk/sdk-scenarios-direct.test.ts.

let env: TestEnvironment;
beforeEach(async () => {
  env = await createTestEnvironment({ mode: 'queued' });
});
afterEach(() => env.stop());

describe('SDK scenarios, queued mode', () => {
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
