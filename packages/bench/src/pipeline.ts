import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import { newMessageId } from '@reach/core';
import { SchemaCodec, type StatusEvent } from '@reach/envelope';
import { TOPICS, valueSubject, type Kafka } from '@reach/kafka';
import { drive, Samples } from './stats.js';
import type { LoopResult } from './raw.js';

export interface PipelineOptions {
  kafka: Kafka;
  registryUrl: string;
  wsUrl: string;
  schemaRegistryUrl: string;
  adminToken: string;
  agents: number;
  producers: number;
  rate: number;
  durationMs: number;
  warmupMs: number;
  payloadBytes: number;
}

interface Registered {
  agent_id: string;
  token: string;
  heartbeat_interval_ms: number;
}

async function register(opts: PipelineOptions, body: Record<string, unknown>): Promise<Registered> {
  const res = await fetch(`${opts.registryUrl}/v1/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${opts.adminToken}` },
    body: JSON.stringify(body),
  });
  if (res.status !== 201) throw new Error(`registering ${String(body.agent_id)} failed: ${res.status} ${await res.text()}`);
  return (await res.json()) as Registered;
}

/** A simulated agent speaking DESIGN §4 directly: hello, then ack every delivery at once. */
async function connectAgent(opts: PipelineOptions, reg: Registered, onDeliver: (createdAt: number) => void): Promise<WebSocket> {
  const ws = new WebSocket(opts.wsUrl, { headers: { authorization: `Bearer ${reg.token}` } });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => ws.send(JSON.stringify({ type: 'hello', agent_id: reg.agent_id, token: reg.token })));
    ws.once('error', reject);
    ws.on('message', (data) => {
      const frame = JSON.parse(String(data)) as { type: string; seq?: number; message?: { message_id: string; created_at: string }; ts?: number };
      if (frame.type === 'welcome') resolve();
      else if (frame.type === 'deliver' && frame.message) {
        onDeliver(Date.parse(frame.message.created_at));
        ws.send(JSON.stringify({ type: 'ack', seq: frame.seq, message_id: frame.message.message_id }));
      } else if (frame.type === 'ping') ws.send(JSON.stringify({ type: 'pong', ts: frame.ts }));
    });
  });
  return ws;
}

/**
 * The pipeline under load: N agents on WebSockets offering one capability, M producers writing
 * framed envelopes to reach.ingress.v1 at a fixed total rate. Measures send → agent receive
 * (at the agent) and send → DELIVERED (the dispatcher's status event after the ack).
 */
export async function pipelineLoop(opts: PipelineOptions): Promise<{ receive: LoopResult; delivered: LoopResult }> {
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
  const sockets = await Promise.all(
    agents.map((a) =>
      connectAgent(opts, a, (createdAt) => {
        if (createdAt >= measureFrom) {
          received++;
          receive.add(Date.now() - createdAt);
        }
      }),
    ),
  );
  const heartbeats = setInterval(() => {
    for (const a of [...agents, producerAgent]) {
      void fetch(`${opts.registryUrl}/v1/agents/${a.agent_id}/heartbeat`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${a.token}` },
        body: JSON.stringify({ current_load: 0, queue_length: 0, avg_latency_ms: 1, health: 1 }),
      }).catch(() => undefined);
    }
  }, 20_000);

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
          const env = {
            message_id: id,
            message_type: 'task_request',
            capability,
            topic: null,
            target_agent_id: null,
            producer: producerAgent.agent_id,
            trace_id: randomBytes(16).toString('hex'),
            request_id: null,
            idempotency_key: null,
            session_id: null,
            correlation_id: null,
            reply_to: null,
            priority: 'NORMAL',
            tags: [],
            retryable: true,
            timeout_ms: null,
            created_at: now,
            expire_at: null,
            schema_version: 1,
            content_type: 'application/json',
            payload,
            headers: {},
          };
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
    };
  } finally {
    clearInterval(heartbeats);
    await tap.disconnect().catch(() => undefined);
    await Promise.all(producers.map((p) => p.disconnect().catch(() => undefined)));
    for (const ws of sockets) ws.close();
    await Promise.all(
      [...agents, producerAgent].map((a) =>
        fetch(`${opts.registryUrl}/v1/agents/${a.agent_id}`, { method: 'DELETE', headers: { authorization: `Bearer ${opts.adminToken}` } }).catch(
          () => undefined,
        ),
      ),
    );
  }
}
