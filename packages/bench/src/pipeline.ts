import { randomBytes } from 'node:crypto';
import { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import { newMessageId } from '@reach/core';
import { SchemaCodec, type StatusEvent } from '@reach/envelope';
import { TOPICS, valueSubject, type Kafka } from '@reach/kafka';
import { drive, Samples } from './stats.js';
import type { LoopResult } from './raw.js';
import { benchEnvelope, connectAgent, deregister, heartbeats, raiseQuota, register, type StackEndpoints } from './stack.js';

export interface PipelineOptions extends StackEndpoints {
  kafka: Kafka;
  schemaRegistryUrl: string;
  agents: number;
  producers: number;
  rate: number;
  durationMs: number;
  warmupMs: number;
  payloadBytes: number;
}

/**
 * The pipeline under load: N agents on WebSockets offering one capability, M producers writing
 * framed envelopes to reach.ingress.v1 at a fixed total rate. Measures send → agent receive
 * (at the agent) and send → DELIVERED (the dispatcher's status event after the ack).
 */
export async function pipelineLoop(opts: PipelineOptions): Promise<{ receive: LoopResult; delivered: LoopResult; quota: string }> {
  const run = randomBytes(3).toString('hex');
  const capability = `bench_echo_${run}`;
  const registry = new SchemaRegistry({ host: opts.schemaRegistryUrl });
  const ingressId = await registry.getLatestSchemaId(valueSubject(TOPICS.ingress.name));
  const codec = SchemaCodec.connect(opts.schemaRegistryUrl, { maxPayloadBytes: 1 << 20 });
  await codec.init([{ subject: valueSubject(TOPICS.status.name), schema: 'reach.v1.StatusEvent' }]);

  const sentAt = new Map<string, number>();
  const receive = new Samples();
  const delivered = new Samples();
  let measureFrom = Number.POSITIVE_INFINITY;
  let received = 0;
  let deliveredCount = 0;

  const agents = await Promise.all(
    Array.from({ length: opts.agents }, (_, i) =>
      register(opts, {
        agent_id: `bench.agent.${run}.${i}`,
        agent_type: 'bench',
        endpoints: { ws: opts.wsUrl },
        capabilities: [{ name: capability, mode: 'handle' }],
        metadata: { max_concurrency: 10_000, domain: 'default' },
        ttl_s: 60,
      }),
    ),
  );
  const producerAgent = await register(opts, {
    agent_id: `bench.producer.${run}`,
    agent_type: 'bench',
    capabilities: [],
    metadata: { max_concurrency: 1 },
    ttl_s: 60,
  });
  // Well above the target rate: the quota must never be what limits the benchmark.
  const quota = await raiseQuota(opts, producerAgent.agent_id, opts.rate > 0 ? Math.max(1000, opts.rate * 2) : 1_000_000);
  const sockets = await Promise.all(
    agents.map((a) =>
      connectAgent(opts, a, (frame, answer) => {
        const createdAt = Date.parse(frame.message.created_at);
        if (createdAt >= measureFrom) {
          received++;
          receive.add(Date.now() - createdAt);
        }
        answer();
      }),
    ),
  );
  const stopHeartbeats = heartbeats(opts, [...agents, producerAgent]);

  // Watch DELIVERED events from "now" on.
  const admin = opts.kafka.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(TOPICS.status.name);
  await admin.disconnect();
  const tap = opts.kafka.consumer({ groupId: `reach.bench.${run}`, maxWaitTimeInMs: 5 });
  await tap.connect();
  await tap.subscribe({ topic: TOPICS.status.name, fromBeginning: true });
  const joined = new Promise<void>((resolve) => tap.on(tap.events.GROUP_JOIN, () => resolve()));
  await tap.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      for (const m of batch.messages) {
        const ev = await codec.decode<StatusEvent>(valueSubject(TOPICS.status.name), m.value);
        if (ev.state !== 'DELIVERED') continue;
        const t0 = sentAt.get(ev.message_id);
        if (t0 === undefined) continue;
        sentAt.delete(ev.message_id);
        if (t0 >= measureFrom) {
          deliveredCount++;
          delivered.add(ev.at - t0);
        }
      }
    },
  });
  for (const p of ends) tap.seek({ topic: TOPICS.status.name, partition: p.partition, offset: p.offset });
  await joined;

  const producers = await Promise.all(
    Array.from({ length: opts.producers }, async () => {
      const p = opts.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
      await p.connect();
      return p;
    }),
  );
  const payload = Buffer.from(JSON.stringify({ data: 'x'.repeat(Math.max(0, opts.payloadBytes - 12)) }));
  let next = 0;
  const started = performance.now();
  measureFrom = Date.now() + opts.warmupMs;
  let measuredSent = 0;
  try {
    const sent = await drive(opts.rate, opts.durationMs + opts.warmupMs, async (n) => {
      const now = Date.now();
      const messages = await Promise.all(
        Array.from({ length: n }, async () => {
          const id = newMessageId(now);
          sentAt.set(id, now);
          if (now >= measureFrom) measuredSent++;
          const env = benchEnvelope({ id, now, capability, producer: producerAgent.agent_id, priority: 'NORMAL', payload });
          return { key: id, value: await registry.encode(ingressId, env), headers: { 'reach-token': producerAgent.token } };
        }),
      );
      const producer = producers[next++ % producers.length]!;
      await producer.send({ topic: TOPICS.ingress.name, acks: -1, messages });
    });
    const deadline = Date.now() + 20_000;
    while ((received < measuredSent || deliveredCount < measuredSent) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const seconds = (performance.now() - started) / 1000;
    void sent;
    const base = { targetRate: opts.rate, sent: measuredSent, seconds };
    return {
      receive: { name: 'pipeline send → agent receive', ...base, received, latency: receive.summary() },
      delivered: { name: 'pipeline send → DELIVERED', ...base, received: deliveredCount, latency: delivered.summary() },
      quota,
    };
  } finally {
    stopHeartbeats();
    await tap.disconnect().catch(() => undefined);
    await Promise.all(producers.map((p) => p.disconnect().catch(() => undefined)));
    for (const ws of sockets) ws.close();
    await deregister(
      opts,
      [...agents, producerAgent].map((a) => a.agent_id),
    );
  }
}
