import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { startTestAgent, stopTestAgents } from '@reach/sdk/testing';
import { adminToken, uniq, urls } from '../../helpers/env.js';
import { testEnvelope } from '../../helpers/envelope.js';
import { plainKafka, registryClient, TopicTap, statusTap } from '../../helpers/kafka.js';
import { scrape, total } from '../../helpers/metrics.js';
import { eventually } from '../../helpers/wait.js';
import { call, parkedMessage, resetQuota, setQuota, type Json } from './quota-helpers.js';
import { registerProducer, type ProducerAgent } from './producer-agent.js';

// Over quota (R-D7) on every ingress path of the running stack: HTTP answers 429 with
// Retry-After and 4129, and writes nothing else (issue #13: no dead letter, no status row, only
// the reach_ingress_http_refusals_total counter); the Kafka path (and WebSocket `send` frames, which the dispatcher forwards
// to it) dead-letters the record with reason RATE_LIMITED, marks it REJECTED 4129 and sends the
// producer a receipt. Each test uses its own producer with a tiny override (a token every
// 100 s), so the bucket never refills during the test.
const kafka = plainKafka();
const registry = registryClient();
let producer: Producer;
let envelopeId: number;
let pending: TopicTap<Record<string, unknown>>;
let dlq: TopicTap<Record<string, unknown>>;
let status: TopicTap<Record<string, unknown>>;
const overridden: string[] = [];

async function producerWithQuota(burst: number): Promise<ProducerAgent> {
  const agent = await registerProducer('quota');
  overridden.push(agent.agentId);
  await setQuota(agent.agentId, 0.01, burst);
  return agent;
}

async function messageState(id: string): Promise<Json | undefined> {
  const a = await call('GET', `/v1/messages/${id}`);
  return a.status === 200 ? a.body : undefined;
}

const aboutMessage = (id: string) => (r: { value?: Record<string, unknown> | undefined }) =>
  r.value?.message_id === id || (r.value?.envelope as { message_id?: string } | null | undefined)?.message_id === id;

beforeAll(async () => {
  envelopeId = await registry.getLatestSchemaId('reach.ingress.v1-value');
  producer = kafka.producer();
  await producer.connect();
  [pending, dlq, status] = await Promise.all([
    new TopicTap<Record<string, unknown>>(kafka, 'reach.pending.v1', registry).open(),
    new TopicTap<Record<string, unknown>>(kafka, 'reach.dlq.v1', registry).open(),
    statusTap<Record<string, unknown>>(kafka, registry).open(),
  ]);
});

afterAll(async () => {
  await stopTestAgents();
  await Promise.all(overridden.map(resetQuota));
  await Promise.all([pending?.close(), dlq?.close(), status?.close(), producer?.disconnect()]);
});

describe('over quota over HTTP', () => {
  it('admits the burst, then answers 429 with Retry-After and 4129, counted but with no dead letter and no status row', async () => {
    const agent = await producerWithQuota(2);
    const refusalsBefore = total(await scrape(urls.ingress), 'reach_ingress_http_refusals_total', { status: '429', code: '4129' });
    const capability = uniq('quota_http');
    const answers: Awaited<ReturnType<typeof call>>[] = [];
    for (let i = 0; i < 4; i++) answers.push(await call('POST', '/v1/messages', { token: agent.token, body: parkedMessage(capability, i) }));
    expect(answers.map((a) => a.status)).toEqual([202, 202, 429, 429]);

    const refused = answers[2]!;
    expect(refused.body.error).toMatchObject({ code: 4129, name: 'RATE_LIMITED', details: { rate_per_s: 0.01, burst: 2 } });
    expect(refused.body.error.message).toMatch(new RegExp(`producer ${agent.agentId.replace(/\./g, '\\.')} is over its quota`));
    // Seconds until a token is back: at 0.01/s nearly 100 s, never 0, and the same in the body.
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(90);
    expect(retryAfter).toBeLessThanOrEqual(100);
    expect(refused.body.error.details.retry_after_s).toBe(retryAfter);

    const id = refused.body.error.details.message_id as string;
    expect(id).toMatch(/^msg_/);
    // Counted (at least these two: test files run in parallel) …
    expect(total(await scrape(urls.ingress), 'reach_ingress_http_refusals_total', { status: '429', code: '4129' })).toBeGreaterThanOrEqual(refusalsBefore + 2);
    // … and nothing else: a refusal used to be produced before the answer, so once every
    // partition is read to its end, its dead letter and status event would be there.
    await Promise.all([dlq.readToEnd(), status.readToEnd()]);
    expect(dlq.records.filter(aboutMessage(id))).toEqual([]);
    expect(status.records.filter((r) => r.value?.message_id === id)).toEqual([]);
    expect(await messageState(id)).toBeUndefined();
    // The admitted ones went on as usual.
    await pending.waitFor((r) => r.value?.message_id === answers[0]!.body.message_id);
  });

  it('does not count a resubmission with the same Idempotency-Key, even once over quota', async () => {
    const agent = await producerWithQuota(2);
    const capability = uniq('quota_idem');
    const key = uniq('key');
    const first = await call('POST', '/v1/messages', { token: agent.token, body: parkedMessage(capability), headers: { 'idempotency-key': key } });
    expect(first.status).toBe(202);
    // Duplicates while a token is left give it back …
    for (let i = 0; i < 3; i++) {
      const dup = await call('POST', '/v1/messages', { token: agent.token, body: parkedMessage(capability), headers: { 'idempotency-key': key } });
      expect(dup).toMatchObject({ status: 200, body: { message_id: first.body.message_id } });
    }
    // … so the second token is still there for a new message.
    expect((await call('POST', '/v1/messages', { token: agent.token, body: parkedMessage(capability) })).status).toBe(202);
    expect((await call('POST', '/v1/messages', { token: agent.token, body: parkedMessage(capability) })).status).toBe(429);
    // Over quota now, the duplicate is still answered as the duplicate, not refused.
    const late = await call('POST', '/v1/messages', { token: agent.token, body: parkedMessage(capability), headers: { 'idempotency-key': key } });
    expect(late).toMatchObject({ status: 200, body: { message_id: first.body.message_id } });
  });

  it("does not meter the admin token: an operator's sends are never refused for a producer's quota", async () => {
    const capability = uniq('quota_admin');
    const answers = await Promise.all(
      Array.from({ length: 5 }, (_, i) => call('POST', '/v1/messages', { token: adminToken(), body: parkedMessage(capability, i) })),
    );
    expect(answers.map((a) => a.status)).toEqual([202, 202, 202, 202, 202]);
  });
});

describe('over quota on the Kafka ingress path', () => {
  it('dead-letters the record (RATE_LIMITED, 4129), marks it REJECTED 4129 and sends the producer a receipt', async () => {
    const agent = await producerWithQuota(1);
    const capability = uniq('quota_kafka');
    const envs = [0, 1, 2].map((n) =>
      testEnvelope({ producer: agent.agentId, capability, expire_at: Date.now() + 600_000, payload: Buffer.from(JSON.stringify({ n })) }),
    );
    for (const env of envs) {
      await producer.send({
        topic: 'reach.ingress.v1',
        acks: -1,
        messages: [{ key: env.message_id as string, value: await registry.encode(envelopeId, env), headers: { 'reach-token': agent.token } }],
      });
    }
    const [ok, ...over] = envs.map((e) => e.message_id as string);
    await pending.waitFor((r) => r.value?.message_id === ok);
    for (const id of over) {
      const dead = await dlq.waitFor(aboutMessage(id));
      expect(dead.value).toMatchObject({ reason: 'RATE_LIMITED', code: 4129, service: 'ingress', source_topic: 'reach.ingress.v1', producer: agent.agentId });
      expect(dead.value!.raw_headers).not.toHaveProperty('reach-token');
      const st = await status.waitFor((r) => r.value?.message_id === id && r.value.state === 'REJECTED');
      expect(st.value).toMatchObject({ code: 4129, service: 'ingress' });
      const receipt = await pending.waitFor((r) => r.value?.message_type === 'reach.receipt' && r.value.correlation_id === id);
      expect(receipt.value).toMatchObject({ target_agent_id: agent.agentId, producer: 'reach' });
      expect(JSON.parse(Buffer.from(receipt.value!.payload as Buffer).toString())).toMatchObject({
        message_id: id,
        status: 'REJECTED',
        code: 4129,
        name: 'RATE_LIMITED',
      });
    }
    const state = await eventually('REJECTED 4129 in the read model', async () => {
      const s = await messageState(over[0]!);
      return s?.status === 'REJECTED' ? s : undefined;
    });
    expect(state).toMatchObject({ code: 4129 });

    // The dead-letter service stores the entries and filters by the new reason.
    const stored = await eventually(
      'RATE_LIMITED entries in the dead-letter store',
      async () => {
        const res = await fetch(`${urls.deadLetter}/v1/dlq?reason=RATE_LIMITED&capability=${capability}`, {
          headers: { authorization: `Bearer ${adminToken()}` },
        });
        const body = (await res.json()) as { entries: Array<{ message_id: string; reason: string; code: number }> };
        return body.entries.length === 2 ? body.entries : undefined;
      },
      30_000,
    );
    expect(stored.map((e) => e.message_id).sort()).toEqual([...over].sort());
    expect(stored.every((e) => e.reason === 'RATE_LIMITED' && e.code === 4129)).toBe(true);
  });

  it('refuses WebSocket `send` frames over quota the same way: the agent gets a 4129 receipt', async () => {
    const agent = await startTestAgent();
    overridden.push(agent.agentId);
    await setQuota(agent.agentId, 0.01, 1);
    const receipts: Array<{ message_id: string; code: number }> = [];
    agent.node.on('receipt', (r) => receipts.push(r));
    const topic = uniq('quota_ws');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await agent.node.send({ topic, payload: { i }, expire_at: Date.now() + 600_000 }));
    await eventually('two 4129 receipts', () => receipts.filter((r) => r.code === 4129).length === 2);
    expect(receipts.map((r) => r.message_id).sort()).toEqual(ids.slice(1).sort());
    const state = await eventually('REJECTED in the read model', async () => {
      const s = await messageState(ids[2]!);
      return s?.status === 'REJECTED' ? s : undefined;
    });
    expect(state).toMatchObject({ code: 4129 });
  });
});
