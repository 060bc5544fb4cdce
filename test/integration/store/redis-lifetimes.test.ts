import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { createRedis, keyPattern, redisStorage, type Redis } from '@reach/store';
import { startTestAgent, stopTestAgents, testClient } from '@reach/sdk/testing';
import { stack, uniq } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';

// Issue 26 (bounded storage): every Redis key Agent-Reach writes has a TTL or an owner that
// deletes it, and what is kept per answered message is no more than the protocol needs. An SDK
// agent answers a capability message with `result` then `ack`: once the result is recorded its
// context (the largest per-message key, ~0.9 KB) only has to outlive the frames that may
// follow, not the message's whole result window (60 s … 5 min).
const client = testClient();
let redis: Redis;

/** Key families an owner deletes (sets and hashes trimmed by a sweeper; docs/storage.md lists them). */
const OWNED_WITHOUT_TTL = new Set([
  'reach:circuits',
  'reach:dispatchers',
  'reach:ended',
  'reach:acked',
  'reach:acked-at',
  'reach:acked-late',
  'reach:in-progress',
  'reach:deadlines',
  'reach:wait-deadlines',
  'reach:lane-backlog',
  'reach:agents',
  'reach:leases',
  'reach:offline',
  'reach:agent:*',
  'reach:agent-rev:*',
  'reach:cap:*',
  'reach:buf:{agent}',
  'reach:unrel:{agent}',
  'reach:wait:{agent}:HIGH',
  'reach:wait:{agent}:NORMAL',
  'reach:wait:{agent}:LOW',
  'reach:worder:{agent}',
  'reach:wrr:{agent}',
]);

beforeAll(() => {
  redis = createRedis(stack.redisUrl, silentLogger);
});
afterEach(stopTestAgents);
afterAll(async () => {
  await redis?.quit();
});

describe('Redis key lifetimes', () => {
  it('keeps the result context of an SDK-answered message for seconds, not its result window', async () => {
    const cap = uniq('life_res').replace(/-/g, '_');
    const agent = await startTestAgent({ handlers: { [cap]: async () => ({ ok: true }) } });
    const sent = await client.submit({ capability: cap, payload: { n: 1 } });
    await eventually('the handler ran', async () => agent.received.length === 1 || undefined, 15_000);
    const key = `reach:res:{${agent.agentId}}:${sent.message_id}`;
    // once the result is recorded the context is replaced by the answered marker (60 s), not kept
    // for the message's result window (60 s – 5 min)
    const ttl = await eventually(
      'the result context replaced by the answered marker',
      async () => {
        const t = await redis.ttl(key);
        return t > 0 && t <= 60 && (await redis.get(key)) === '=' ? t : undefined;
      },
      10_000,
    );
    expect(ttl).toBeLessThanOrEqual(60);
  });

  it('leaves no key of an unknown family without a TTL after traffic', async () => {
    const cap = uniq('life_all').replace(/-/g, '_');
    await startTestAgent({ handlers: { [cap]: async () => ({ ok: true }) } });
    await Promise.all(Array.from({ length: 20 }, (_, i) => client.submit({ capability: cap, payload: { i }, idempotency_key: uniq('k') })));
    const report = await redisStorage(redis, { scan: true });
    const unowned = (report.patterns ?? []).filter((p) => p.withoutTtl > 0 && !OWNED_WITHOUT_TTL.has(p.pattern)).map((p) => p.pattern);
    expect(unowned).toEqual([]);
    expect(keyPattern('reach:res:{agent-1}:msg_01JABC')).toBe('reach:res:{agent}:*');
    // a capability name may hold ':' (CI, 6 December: a `query:…` capability read as a family of its own)
    expect(keyPattern('reach:cap:query:search')).toBe('reach:cap:*');
    expect(keyPattern('reach:agent-rev:team:a1')).toBe('reach:agent-rev:*');
  });
});
