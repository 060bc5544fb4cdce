import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { ulid } from 'ulid';
import { silentLogger } from '@reach/core';
import { createRedis, type Redis } from '@reach/store';
import { startTestAgent, stopTestAgents, testClient, type TestAgent } from '@reach/sdk/testing';
import { adminToken, stack, uniq, urls } from '../../helpers/env.js';
import { plainKafka, registryClient, TopicTap, statusTap } from '../../helpers/kafka.js';
import { registerProducer, type ProducerAgent } from '../ingress/producer-agent.js';
import { eventually } from '../../helpers/wait.js';
import { testEnvelope } from '../../helpers/envelope.js';

// Issue #4 point 7 (R-D5, R-D6, R-G2): a duplicate produce, a retried HTTP submit, a
// redelivery after a missed ack — a handler using the SDK runs at most once per idempotency key
// while the key is remembered (Redis, PostgreSQL when Redis lost it), and the sender gets the
// first result. Real agents on real WebSockets, a plain kafkajs producer, plain HTTP.
const client = testClient();
const kafka = plainKafka();
const registry = registryClient();
const cap = (what: string) => uniq(`idem_${what}`).replace(/-/g, '_');

let producer: Producer;
let envelopeSchemaId: number;
let kafkaAgent: ProducerAgent;
let redis: Redis;
let statuses: TopicTap<{ message_id: string; state: string; service: string }>;

beforeAll(async () => {
  producer = kafka.producer();
  await producer.connect();
  envelopeSchemaId = await registry.getLatestSchemaId('reach.ingress.v1-value');
  kafkaAgent = await registerProducer('idem-producer');
  redis = createRedis(stack.redisUrl, silentLogger);
  statuses = await statusTap<{ message_id: string; state: string; service: string }>(kafka, registry).open();
}, 60_000);
afterEach(stopTestAgents);
afterAll(async () => {
  await Promise.all([producer?.disconnect(), statuses?.close(), redis?.quit()]);
});

interface Status {
  status: string;
  attempt: number;
  agent_id?: string | null;
  result?: unknown;
}

async function statusOf(id: string): Promise<Status | undefined> {
  const res = await fetch(`${urls.ingress}/v1/messages/${id}`, { headers: { authorization: `Bearer ${adminToken()}` } });
  return res.ok ? ((await res.json()) as Status) : undefined;
}

const reaches = (id: string, state: string) => eventually(`${id} ${state}`, async () => ((await statusOf(id))?.status === state ? statusOf(id) : undefined));

/** A handler that counts its runs and answers with the run number, so a second run would show. */
function counting(delayMs = 0) {
  const runs: string[] = [];
  const handler = async (msg: { message_id: string }) => {
    runs.push(msg.message_id);
    const run = runs.length;
    if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
    return { run };
  };
  return { runs, handler };
}

interface SeenDelivery {
  seq: number;
  attempt: number;
  message_id: string;
}

/** Every deliver frame the node is given (before its dedupe decides), read off its frame handler. */
function watchDeliveries(agent: TestAgent): SeenDelivery[] {
  const seen: SeenDelivery[] = [];
  const node = agent.node as unknown as { onDeliver(d: { seq: number; attempt: number; message: { message_id: string } }): void };
  const original = node.onDeliver.bind(node);
  node.onDeliver = (d) => {
    seen.push({ seq: d.seq, attempt: d.attempt, message_id: d.message.message_id });
    original(d);
  };
  return seen;
}

/**
 * Drops the node's first answer (result and ack) to one message, as if the frames were lost
 * on the way: the handler ran and returned, but the dispatcher never hears of it.
 */
function dropFirstAnswer(agent: TestAgent, messageId: () => string | undefined): Array<{ type: string }> {
  const dropped: Array<{ type: string }> = [];
  const node = agent.node as unknown as { sendFrame(f: { type: string; message_id?: string }): void };
  const original = node.sendFrame.bind(node);
  node.sendFrame = (f) => {
    const mine = f.message_id !== undefined && f.message_id === messageId();
    if (mine && (f.type === 'result' || f.type === 'ack') && !dropped.some((d) => d.type === f.type)) {
      dropped.push({ type: f.type });
      return;
    }
    original(f);
  };
  return dropped;
}

function kafkaEnvelope(capability: string, idempotencyKey: string): Record<string, unknown> {
  return testEnvelope({
    message_id: `msg_${ulid()}`,
    capability,
    producer: kafkaAgent.agentId,
    idempotency_key: idempotencyKey,
    payload: Buffer.from(JSON.stringify({ hello: 1 })),
  });
}

/** Writes envelopes to reach.ingress.v1 in order, all to one partition, as the producing agent. */
async function produceInOrder(envs: Array<Record<string, unknown>>): Promise<void> {
  const messages = await Promise.all(
    envs.map(async (env) => ({
      key: env.message_id as string,
      value: await registry.encode(envelopeSchemaId, env),
      headers: { 'reach-token': kafkaAgent.token },
      partition: 0,
    })),
  );
  await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages });
}

describe('idempotency over Kafka ingress (R-D5, R-G2)', () => {
  it('the same envelope produced twice: routed twice, delivered and run once (the dispatcher absorbs the repeat)', async () => {
    const capability = cap('kafka_same');
    const { runs, handler } = counting();
    const agent = await startTestAgent({ handlers: { [capability]: handler }, direct: async () => 'marker' });
    const deliveries = watchDeliveries(agent);
    const env = kafkaEnvelope(capability, uniq('key'));
    const id = env.message_id as string;
    await produceInOrder([env, env]);

    // Ingress forwards a record of the message that already owns its key again (it cannot tell a
    // producer's duplicate from its own replay after a crash), and the router routes both.
    await eventually('both copies routed', () =>
      statuses.records.filter((r) => r.value?.message_id === id && r.value.state === 'ROUTED').length >= 2 ? true : undefined,
    );
    // The dispatcher stores a delivery once per (message, attempt): the repeat is not sent again.
    // A marker routed to the same agent afterwards lands behind both copies on its partition of
    // reach.routed.v1, so once the marker arrives both copies have been handled.
    const marker = await client.submit({ target_agent_id: agent.agentId, payload: { marker: true } });
    await eventually('the marker delivered', () => deliveries.some((d) => d.message_id === marker.message_id));
    const done = await reaches(id, 'DELIVERED');
    expect(done.agent_id).toBe(agent.agentId);
    expect(deliveries.filter((d) => d.message_id === id)).toHaveLength(1);
    expect(runs).toEqual([id]);
    expect(done.result).toMatchObject({ status: 'ok', payload: { run: 1 } });
  });

  it('a second message with the same idempotency key is dropped by ingress: no agent sees it', async () => {
    const capability = cap('kafka_key');
    const first = counting();
    const second = counting();
    // Two agents: a duplicate that got through could run on the other node, whose cache is its own.
    const a = await startTestAgent({ handlers: { [capability]: first.handler } });
    const b = await startTestAgent({ handlers: { [capability]: second.handler } });
    const seenA = watchDeliveries(a);
    const seenB = watchDeliveries(b);
    const key = uniq('key');
    const original = kafkaEnvelope(capability, key);
    const retry = kafkaEnvelope(capability, key); // the producer's retry: a new message id, the same key
    const marker = kafkaEnvelope(capability, uniq('key'));
    await produceInOrder([original, retry, marker]);

    // Ingress handles a partition in order: once the marker is delivered, the retry was decided.
    await reaches(original.message_id as string, 'DELIVERED');
    await reaches(marker.message_id as string, 'DELIVERED');
    const all = [...seenA, ...seenB];
    expect(all.filter((d) => d.message_id === retry.message_id)).toEqual([]);
    expect(all.filter((d) => d.message_id === original.message_id)).toHaveLength(1);
    expect([...first.runs, ...second.runs].filter((m) => m === original.message_id)).toHaveLength(1);
    expect(await statusOf(retry.message_id as string)).toBeUndefined();
  });
});

describe('idempotency over HTTP (R-D5, R-C9)', () => {
  it('a retried submit with the same Idempotency-Key gets the same message id and the first result, also once Redis forgot the key', async () => {
    const capability = cap('http');
    const { runs, handler } = counting(300);
    await startTestAgent({ handlers: { [capability]: handler } });
    const key = uniq('key');

    const first = await client.submit({ capability, payload: { n: 1 } }, { idempotencyKey: key });
    expect(first.http_status).toBe(202);

    // Retried while the handler runs: the same message, and the wait returns its (first) result.
    const retried = await client.submit({ capability, payload: { n: 1 } }, { idempotencyKey: key, waitMs: 10_000 });
    expect(retried).toMatchObject({ http_status: 200, message_id: first.message_id, status: 'DELIVERED' });
    expect(retried.result).toMatchObject({ status: 'ok', payload: { run: 1 } });

    // Redis lost the key (expired early, flushed, failed over): PostgreSQL decides.
    const redisKey = `reach:idem:admin:${key}`;
    expect(await redis.get(redisKey)).toBe(first.message_id);
    await redis.del(redisKey);
    const afterLoss = await client.submit({ capability, payload: { n: 1 } }, { idempotencyKey: key, waitMs: 10_000 });
    expect(afterLoss).toMatchObject({ http_status: 200, message_id: first.message_id });
    expect(afterLoss.result).toMatchObject({ status: 'ok', payload: { run: 1 } });
    // … and put the key back into Redis for the next duplicate.
    expect(await redis.get(redisKey)).toBe(first.message_id);

    const plain = await client.submit({ capability, payload: { n: 1 } }, { idempotencyKey: key });
    expect(plain).toMatchObject({ http_status: 200, message_id: first.message_id, status: 'DELIVERED' });
    expect(runs).toEqual([first.message_id]);
  });
});

describe('redelivery after a missed ack, to the same SDK node (R-G2, R-D6)', () => {
  it('[dedupe-redelivery] the handler ran and returned but its answer was lost: the retry is answered from the earlier result, the handler is not run again', async () => {
    const capability = cap('lost_ack');
    const { runs, handler } = counting();
    const agent = await startTestAgent({ handlers: { [capability]: handler } });
    const deliveries = watchDeliveries(agent);
    // The first message this node is given (recorded before its handler runs) loses its answer.
    const dropped = dropFirstAnswer(agent, () => deliveries[0]?.message_id);
    // The only agent of the capability: the retry comes back to it (the failed agent is only
    // avoided when another candidate exists).
    const key = uniq('key');
    const sent = await client.submit({ capability, payload: {}, timeout_ms: 1000 }, { idempotencyKey: key });
    const s = await reaches(sent.message_id, 'DELIVERED');
    expect(s).toMatchObject({ agent_id: agent.agentId, result: { status: 'ok', payload: { run: 1 } } });
    expect(s.attempt).toBeGreaterThanOrEqual(1);
    expect(dropped.map((d) => d.type).sort()).toEqual(['ack', 'result']);
    const mine = deliveries.filter((d) => d.message_id === sent.message_id);
    expect(mine.length).toBeGreaterThanOrEqual(2);
    expect(mine[0]!.attempt).toBe(0);
    expect(runs).toEqual([sent.message_id]);
    // A sender retrying its submit gets that same first result.
    const again = await client.submit({ capability, payload: {}, timeout_ms: 1000 }, { idempotencyKey: key, waitMs: 1000 });
    expect(again).toMatchObject({ http_status: 200, message_id: sent.message_id, result: { status: 'ok', payload: { run: 1 } } });
  });

  it('the handler is slower than the ack deadline: the redelivery waits for the running handler and gets its result', async () => {
    const capability = cap('slow');
    // Deadline 1.5 s; the retry (backoff ≈ 200 ms) arrives while the handler still runs (2.5 s),
    // and the handler's end answers both deliveries. Without `progress` frames (an SDK that does
    // not send them, or an older one): with them the deadline would move and nothing be retried.
    const { runs, handler } = counting(2_500);
    const agent = await startTestAgent({ handlers: { [capability]: handler }, node: { reportProgress: false } });
    const deliveries = watchDeliveries(agent);
    const sent = await client.submit({ capability, payload: {}, timeout_ms: 1_500 }, { idempotencyKey: uniq('key') });
    const s = await reaches(sent.message_id, 'DELIVERED');
    expect(s).toMatchObject({ agent_id: agent.agentId, result: { status: 'ok', payload: { run: 1 } } });
    expect(s.attempt).toBeGreaterThanOrEqual(1);
    const mine = deliveries.filter((d) => d.message_id === sent.message_id);
    expect(mine.map((d) => d.attempt).slice(0, 2)).toEqual([0, 1]);
    expect(runs).toEqual([sent.message_id]);
  });
});
