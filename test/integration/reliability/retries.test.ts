import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { NonRetryableError } from '@reach/core';
import { startTestAgent, stopTestAgents, testClient, uniqueName } from '@reach/sdk/testing';
import { adminToken, urls } from '../../helpers/env.js';
import { TopicTap, plainKafka, statusTap } from '../../helpers/kafka.js';
import { eventually } from '../../helpers/wait.js';

// Retries, ack deadlines, failover and time budgets against the running stack (R-B9,
// R-D2, R-D3, R-D4, R-D6): SDK agents on real WebSockets, real Kafka topics watched by taps.
const client = testClient();
const cap = (what: string) => uniqueName(`rel_${what}`).replace(/-/g, '_');
/** A hung handler that sends no `progress`: the agent never answers, as a stuck or silent one would. */
const SILENT = { reportProgress: false };

interface Status {
  status: string;
  attempt: number;
  code?: number | null;
  agent_id?: string | null;
}
interface DeadLetter {
  message_id: string | null;
  reason: string;
  code: number;
  attempts: number;
  history_json: string | null;
  envelope: unknown;
}
interface StatusEvent {
  message_id: string;
  state: string;
  attempt: number;
  at: number;
  service: string;
  agent_id: string | null;
  code: number | null;
  detail_json: string | null;
}
interface RetryRequest {
  message_id: string;
  attempt: number;
  not_before: number;
  exclude_agent_ids: string[];
}

async function statusOf(id: string): Promise<Status | undefined> {
  const res = await fetch(`${urls.ingress}/v1/messages/${id}`, { headers: { authorization: `Bearer ${adminToken()}` } });
  return res.ok ? ((await res.json()) as Status) : undefined;
}

const reaches = (id: string, state: string, timeoutMs = 20_000) => {
  let last: Status | undefined;
  return eventually(
    `${id} ${state}`,
    async () => {
      const s = (last = await statusOf(id));
      return s?.status === state ? s : undefined;
    },
    timeoutMs,
    100,
    () => last,
  );
};

let dlq: TopicTap<DeadLetter>;
let statuses: TopicTap<StatusEvent>;
let retries: TopicTap<RetryRequest>;

beforeAll(async () => {
  const kafka = plainKafka();
  [dlq, statuses, retries] = await Promise.all([
    new TopicTap<DeadLetter>(kafka, 'reach.dlq.v1').open(),
    statusTap<StatusEvent>(kafka).open(),
    new TopicTap<RetryRequest>(kafka, 'reach.retry.v1').open(),
  ]);
}, 60_000);
afterEach(stopTestAgents);
afterAll(async () => {
  await Promise.all([dlq.close(), statuses.close(), retries.close()]);
});

describe('attempt counts (R-D3, R-D4)', () => {
  it('[reject-retryable] a handler failing twice then succeeding is attempted exactly 3 times and DELIVERED', async () => {
    const capability = cap('flaky');
    let calls = 0;
    const agent = await startTestAgent({
      handlers: {
        [capability]: async () => {
          calls++;
          if (calls <= 2) throw new Error(`failure ${calls}`);
          return { ok: calls };
        },
      },
    });
    const sent = await client.submit({ capability, payload: { n: 1 } });
    const s = await reaches(sent.message_id, 'DELIVERED');
    expect(s.attempt).toBe(2);
    expect(agent.received.filter((m) => m.message_id === sent.message_id)).toHaveLength(3);
  });

  it('an always failing handler is attempted exactly 1 + 3 times, then DEAD 3004 with a RETRIES_EXHAUSTED dead letter and its history', async () => {
    const capability = cap('broken');
    const agent = await startTestAgent({
      handlers: {
        [capability]: async () => {
          throw new Error('always broken');
        },
      },
    });
    const sent = await client.submit({ capability, payload: {} });
    const s = await reaches(sent.message_id, 'DEAD');
    expect(s.code).toBe(3004);
    expect(agent.received).toHaveLength(4);
    const dl = await dlq.waitFor((r) => r.value?.message_id === sent.message_id);
    expect(dl.value).toMatchObject({ reason: 'RETRIES_EXHAUSTED', code: 3004, attempts: 4 });
    expect(dl.value!.envelope).not.toBeNull();
    const history = JSON.parse(dl.value!.history_json!) as Array<{ attempt: number; agent_id: string; code: number; reason: string; at: string }>;
    expect(history.map((h) => h.attempt)).toEqual([0, 1, 2, 3]);
    expect(history.every((h) => h.agent_id === agent.agentId && h.code === 3003 && h.reason.includes('always broken') && !Number.isNaN(Date.parse(h.at)))).toBe(
      true,
    );
    // The receipt (a reach.receipt to the producer) is produced with the DEAD status.
    // (The tap may trail the read model: wait for the event rather than look once.)
    const dead = await statuses.waitFor((r) => r.value?.message_id === sent.message_id && r.value.state === 'DEAD');
    expect(dead.value!.service).toBe('dispatcher');
  });

  it('a non-retryable failure is attempted exactly once: REJECTED 3003 with a REJECTED dead letter keeping the envelope', async () => {
    const capability = cap('refuse');
    const agent = await startTestAgent({
      handlers: {
        [capability]: async () => {
          throw new NonRetryableError('INVALID_ENVELOPE', 'cannot do this');
        },
      },
    });
    const sent = await client.submit({ capability, payload: {} });
    const s = await reaches(sent.message_id, 'REJECTED');
    expect(s.code).toBe(3003);
    const dl = await dlq.waitFor((r) => r.value?.message_id === sent.message_id);
    expect(dl.value).toMatchObject({ reason: 'REJECTED', code: 3003, attempts: 1 });
    expect(dl.value!.envelope).not.toBeNull();
    await new Promise((r) => setTimeout(r, 800)); // a retry would have come by now (backoff ≤ 240 ms)
    expect(agent.received).toHaveLength(1);
  });

  it('a message sent with retryable: false is attempted exactly once, then DEAD 3004', async () => {
    const capability = cap('once');
    const agent = await startTestAgent({
      handlers: {
        [capability]: async () => {
          throw new Error('transient');
        },
      },
    });
    const sent = await client.submit({ capability, payload: {}, retryable: false });
    expect((await reaches(sent.message_id, 'DEAD')).code).toBe(3004);
    await new Promise((r) => setTimeout(r, 800));
    expect(agent.received).toHaveLength(1);
  });
});

describe('backoff timing (R-D3)', () => {
  it('each retry is re-published at its not_before, which lies within ±20 % of base·2^attempt', async () => {
    const capability = cap('timing');
    await startTestAgent({
      handlers: {
        [capability]: async () => {
          throw new Error('nope');
        },
      },
    });
    const sent = await client.submit({ capability, payload: {} });
    await reaches(sent.message_id, 'DEAD');
    const reqs = retries.records.filter((r) => r.value?.message_id === sent.message_id).map((r) => r.value!);
    expect(reqs.map((r) => r.attempt)).toEqual([0, 1, 2]);
    const events = statuses.records.filter((r) => r.value?.message_id === sent.message_id).map((r) => r.value!);
    for (const req of reqs) {
      const scheduled = events.find((e) => e.service === 'dispatcher' && e.state === 'PENDING' && e.attempt === req.attempt + 1)!;
      const republished = events.find((e) => e.service === 'retry-scheduler' && e.state === 'PENDING' && e.attempt === req.attempt + 1)!;
      const delay = req.not_before - scheduled.at;
      const nominal = 200 * 2 ** req.attempt;
      expect(delay).toBeGreaterThanOrEqual(nominal * 0.8 - 1);
      expect(delay).toBeLessThanOrEqual(nominal * 1.2 + 1);
      expect(republished.at).toBeGreaterThanOrEqual(req.not_before);
      expect(republished.at - req.not_before).toBeLessThanOrEqual(nominal * 0.2 + 100);
    }
  });
});

describe('ack deadlines and failover (R-B9, R-C7)', () => {
  it('a delivery not acked by its deadline fails over to the other agent; the first agent is excluded', async () => {
    const capability = cap('failover');
    let release: () => void = () => undefined;
    const hung = new Promise<void>((r) => (release = r));
    // Its handler hangs without reporting progress: to the dispatcher the agent is silent.
    const stuck = await startTestAgent({ handlers: { [capability]: async () => hung.then(() => ({ late: true })) }, node: SILENT });
    const healthy = await startTestAgent({ handlers: { [capability]: async () => ({ ok: true }) } });
    // Prefer the stuck agent so the first attempt surely goes there.
    const sent = await client.submit({ capability, payload: {}, timeout_ms: 700, headers: { 'reach-preferred-agent': stuck.agentId } });
    const s = await reaches(sent.message_id, 'DELIVERED');
    expect(s.agent_id).toBe(healthy.agentId);
    expect(s.attempt).toBe(1);
    const req = await retries.waitFor((r) => r.value?.message_id === sent.message_id);
    expect(req.value!.exclude_agent_ids).toEqual([stuck.agentId]);
    const timedOut = statuses.records.find((r) => r.value?.message_id === sent.message_id && r.value.code === 3002);
    expect(timedOut?.value?.state).toBe('PENDING');
    // The late ack of the stuck agent changes nothing: still DELIVERED by the healthy one, once.
    release();
    await new Promise((r) => setTimeout(r, 500));
    expect((await statusOf(sent.message_id))?.agent_id).toBe(healthy.agentId);
    const delivered = statuses.records.filter((r) => r.value?.message_id === sent.message_id && r.value.state === 'DELIVERED').map((r) => r.value!);
    expect(delivered).toHaveLength(1);
    expect(delivered[0]!.agent_id).toBe(healthy.agentId);
  });

  it('an agent killed mid-stream: its un-acked deliveries reach the other agent', async () => {
    const capability = cap('killed');
    const victim = await startTestAgent({ handlers: { [capability]: () => new Promise(() => undefined) }, node: SILENT });
    const survivor = await startTestAgent({ handlers: { [capability]: async () => ({ ok: true }) } });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const sent = await client.submit({ capability, payload: { i }, timeout_ms: 1000, headers: { 'reach-preferred-agent': victim.agentId } });
      ids.push(sent.message_id);
    }
    await eventually('victim got all three', async () => victim.received.length >= 3);
    // Abrupt death of its connection: the socket is destroyed, nothing is acked.
    (victim.node as unknown as { socket?: { ws?: { terminate(): void } } }).socket?.ws?.terminate();
    for (const id of ids) expect((await reaches(id, 'DELIVERED')).agent_id).toBe(survivor.agentId);
  });
});

describe('time budget (R-D2)', () => {
  it('a retry that cannot start before the budget ends: DEAD 3005 with a BUDGET_EXCEEDED dead letter', async () => {
    const capability = cap('budget');
    await startTestAgent({ handlers: { [capability]: () => new Promise(() => undefined) }, node: SILENT });
    // health_check: 5 s budget. Attempt 0 times out at 3 s; attempt 1's deadline is cut to the
    // budget's end (5 s), and no retry can start before it.
    const sent = await client.submit({ capability, payload: {}, message_type: 'health_check', timeout_ms: 3000 });
    const s = await reaches(sent.message_id, 'DEAD', 15_000);
    expect(s).toMatchObject({ code: 3005, attempt: 1 });
    const dl = await dlq.waitFor((r) => r.value?.message_id === sent.message_id);
    expect(dl.value).toMatchObject({ reason: 'BUDGET_EXCEEDED', code: 3005 });
  });

  it('past expire_at: DEAD 3006 with an EXPIRED dead letter', async () => {
    const capability = cap('expire');
    await startTestAgent({ handlers: { [capability]: () => new Promise(() => undefined) }, node: SILENT });
    const sent = await client.submit({ capability, payload: {}, timeout_ms: 1000, expire_at: Date.now() + 1500 });
    // Attempt 0 times out at 1 s; the retry is routed with ~0.3 s left, too little to be sent:
    // the dispatcher ends it at once (not the stuck sweep, seconds later).
    const s = await reaches(sent.message_id, 'DEAD', 10_000);
    expect(s.code).toBe(3006);
    const dl = await dlq.waitFor((r) => r.value?.message_id === sent.message_id);
    expect(dl.value).toMatchObject({ reason: 'EXPIRED', code: 3006 });
  });
});
