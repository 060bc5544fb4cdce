import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { plainKafka, registryClient, TopicTap, type Tapped, statusTap } from '../../helpers/kafka.js';
import { uniq } from '../../helpers/env.js';
import { envelope, FakeRegistry } from '../router/fake-registry.js';

// The retry-scheduler against the running stack: RetryRequests written to reach.retry.v1 come
// back on reach.pending.v1 once their not_before is due — never before — with the attempt and
// failover headers. (That a wait survives a restart is shown on the delay stage itself, in
// delay-stage.test.ts, without restarting the shared service.)
type Rec = Record<string, unknown>;

const kafka = plainKafka();
const registry = registryClient();
let producer: Producer;
let fake: FakeRegistry;
let pending: TopicTap<Record<string, unknown>>;
let status: TopicTap<Rec>;

beforeAll(async () => {
  producer = kafka.producer();
  await producer.connect();
  fake = await new FakeRegistry(producer, registry).init();
  [pending, status] = await Promise.all([
    new TopicTap<Record<string, unknown>>(kafka, 'reach.pending.v1', registry).open(),
    statusTap<Rec>(kafka, registry).open(),
  ]);
});

afterAll(async () => {
  await Promise.all([pending?.close(), status?.close()]);
  await producer?.disconnect();
});

function retryRequest(env: Rec, o: { notBefore: number; attempt?: number; reason?: string; exclude?: string[] }): Rec {
  return {
    message_id: env.message_id,
    attempt: o.attempt ?? 0,
    not_before: o.notBefore,
    code: 3002,
    reason: o.reason ?? 'ACK_TIMEOUT',
    failed_agent_id: o.exclude?.[0] ?? null,
    exclude_agent_ids: o.exclude ?? [],
    first_attempt_at: env.created_at,
    envelope: env,
  };
}

const republished = (messageId: unknown) => (r: Tapped<Record<string, unknown>>) =>
  r.value !== undefined && r.value.message_id === messageId && r.value.message_type !== 'reach.receipt';

describe('retry-scheduler', () => {
  it('re-publishes a request only once it is due, as the next attempt with its exclusions', async () => {
    const env = envelope({ capability: uniq('it:retry'), session_id: uniq('session') });
    const notBefore = Date.now() + 2_000;
    await fake.sendRetry(retryRequest(env, { notBefore, attempt: 1, exclude: ['it.failed-agent', 'it.other'] }));

    const got = await pending.waitFor(republished(env.message_id), 20_000);
    expect(got.timestamp).toBeGreaterThanOrEqual(notBefore);
    expect(got.key).toBe(env.session_id);
    expect(got.headers).toMatchObject({ 'reach-attempt': '2', 'reach-exclude-agents': 'it.failed-agent,it.other' });
    expect(got.value).toMatchObject({ message_id: env.message_id, trace_id: env.trace_id, capability: env.capability });

    // The new attempt opens on the timeline.
    const st = await status.waitFor((r) => r.value !== undefined && r.value.message_id === env.message_id && r.value.service === 'retry-scheduler');
    expect(st.value).toMatchObject({ state: 'PENDING', attempt: 2 });
  });

  it('re-publishes a saturation hold as the same attempt, without a status of its own', async () => {
    const env = envelope({ capability: uniq('it:hold') });
    await fake.sendRetry(retryRequest(env, { notBefore: Date.now() + 200, attempt: 3, reason: 'SATURATED' }));
    const got = await pending.waitFor(republished(env.message_id));
    expect(got.key).toBe(env.message_id);
    expect(got.headers['reach-attempt']).toBe('3');
    expect(got.headers['reach-exclude-agents']).toBeUndefined();
    expect(status.records.some((r) => r.value !== undefined && r.value.message_id === env.message_id && r.value.service === 'retry-scheduler')).toBe(false);
  });

  it('a waiting request holds back only its own partition', async () => {
    const later = envelope({ capability: uniq('it:later') });
    const behind = envelope({ capability: uniq('it:behind') });
    const elsewhere = envelope({ capability: uniq('it:elsewhere') });
    // Longer than any backoff another stage may have parked partition 1 with (R-D3: ≤ 4 s · 1.2),
    // so `elsewhere` comes first even when partition 1 is briefly waiting on someone else's record.
    const notBefore = Date.now() + 6_000;
    await fake.sendRetry(retryRequest(later, { notBefore }), 0);
    // Due at once, but queued behind `later` on partition 0: it waits its turn.
    await fake.sendRetry(retryRequest(behind, { notBefore: Date.now() }), 0);
    // Due at once on another partition: not blocked.
    await fake.sendRetry(retryRequest(elsewhere, { notBefore: Date.now() }), 1);

    const e = await pending.waitFor(republished(elsewhere.message_id));
    const l = await pending.waitFor(republished(later.message_id));
    const b = await pending.waitFor(republished(behind.message_id));
    expect(pending.records.indexOf(e)).toBeLessThan(pending.records.indexOf(l));
    expect(l.timestamp).toBeGreaterThanOrEqual(notBefore);
    expect(b.timestamp).toBeGreaterThanOrEqual(notBefore);
  });
});
