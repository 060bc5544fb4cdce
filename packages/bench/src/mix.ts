import { randomBytes } from 'node:crypto';
import { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import { newMessageId, silentLogger, TOKEN_HEADER } from '@reach/core';
import { createKafka, TOPICS, valueSubject, type Kafka } from '@reach/kafka';
import { table } from './report.js';
import { drive, fmt, Samples } from './stats.js';
import { benchEnvelope } from './envelope-template.js';
import { connectAgent, deregister, heartbeats, raiseQuota, register, type StackEndpoints } from './stack.js';

/**
 * `reach bench --mix` (R-D9: HIGH p99 stays low while a LOW backlog drains). N agents
 * with a small max_concurrency and a handler that takes `handlerMs` per message, so their
 * capacity is N × concurrency / handlerMs. First a steady trickle of HIGH alone (idle latency);
 * then the same trickle while a flood of NORMAL + LOW above that capacity builds a backlog in
 * the dispatcher's waiting lanes (phase "mixed": the flood also loads ingress and router); then
 * the flood stops and the trickle goes on while the backlog drains (phase "drain": R-P4's
 * wording). Latency is send → agent receive, measured at the agent; one run, so the figures
 * are read side by side.
 */
/** The run's shape: agents and their speed, the HIGH trickle, the flood, the phases' lengths. */
export interface MixSettings {
  agents: number;
  concurrency: number;
  handlerMs: number;
  highRate: number;
  floodRate: number;
  idleS: number;
  durationS: number;
  drainS: number;
  payloadBytes: number;
}

export interface MixOptions extends StackEndpoints, MixSettings {
  kafka: Kafka;
  schemaRegistryUrl: string;
  /** The dispatcher's HTTP base, for its per-agent flow endpoint (backlog size). */
  dispatcherUrl: string;
}

export type Priority = 'HIGH' | 'NORMAL' | 'LOW';
type Phase = 'warm' | 'idle' | 'mixed' | 'drain';
type Reported = Exclude<Phase, 'warm'>;

export interface MixRow {
  phase: Reported;
  priority: Priority;
  targetRate: number;
  sent: number;
  received: number;
  /** Received per second, from the phase's start to its last receive. */
  achieved: number;
  latency: ReturnType<Samples['summary']>;
}

export interface MixResult {
  rows: MixRow[];
  capacityPerS: number;
  peakWaiting: number | undefined;
  quota: string;
}

class Stream {
  sent = 0;
  received = 0;
  lastAt = 0;
  readonly samples = new Samples();
}

export async function mixLoop(o: MixOptions): Promise<MixResult> {
  const run = randomBytes(3).toString('hex');
  const capability = `bench_mix_${run}`;
  const registry = new SchemaRegistry({ host: o.schemaRegistryUrl });
  const ingressId = await registry.getLatestSchemaId(valueSubject(TOPICS.ingress.name));
  const streams = new Map<string, Stream>();
  const stream = (phase: Phase, priority: Priority) => {
    const key = `${phase}/${priority}`;
    let s = streams.get(key);
    if (!s) streams.set(key, (s = new Stream()));
    return s;
  };

  const agents = await Promise.all(
    Array.from({ length: o.agents }, (_, i) =>
      register(o, {
        agent_id: `bench.mix.${run}.${i}`,
        agent_type: 'bench',
        endpoints: { ws: o.wsUrl },
        capabilities: [{ name: capability, mode: 'handle' }],
        metadata: { max_concurrency: o.concurrency, domain: 'default' },
        ttl_s: 60,
      }),
    ),
  );
  const producerAgent = await register(o, {
    agent_id: `bench.producer.${run}`,
    agent_type: 'bench',
    capabilities: [],
    metadata: { max_concurrency: 1 },
    ttl_s: 60,
  });
  const quota = await raiseQuota(o, producerAgent.agent_id, Math.max(1000, (o.highRate + o.floodRate) * 2));
  const sockets = await Promise.all(
    agents.map((a) =>
      connectAgent(o, a, (frame, answer) => {
        const now = Date.now();
        const { ph } = (frame.message.payload ?? {}) as { ph?: Phase };
        const s = stream(ph ?? 'warm', (frame.message.priority ?? 'NORMAL') as Priority);
        s.received++;
        s.lastAt = now;
        s.samples.add(now - Date.parse(frame.message.created_at));
        setTimeout(answer, o.handlerMs); // the handler's work; the slot stays taken meanwhile
      }),
    ),
  );
  const stopHeartbeats = heartbeats(o, [...agents, producerAgent]);

  // HIGH and the flood on producers of their own: a HIGH record never queues behind a flood batch.
  const highProducer = o.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  const floodProducer = o.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await Promise.all([highProducer.connect(), floodProducer.connect()]);
  const filler = 'x'.repeat(Math.max(0, o.payloadBytes - 24));
  const send = async (producer: typeof highProducer, phase: Phase, priorities: readonly Priority[]) => {
    const now = Date.now();
    const messages = await Promise.all(
      priorities.map(async (priority) => {
        stream(phase, priority).sent++;
        const env = benchEnvelope({
          id: newMessageId(now),
          traceId: randomBytes(16).toString('hex'),
          now,
          capability,
          producer: producerAgent.agent_id,
          priority,
          payload: Buffer.from(JSON.stringify({ ph: phase, d: filler })),
        });
        return { key: env.message_id as string, value: await registry.encode(ingressId, env), headers: { [TOKEN_HEADER]: producerAgent.token } };
      }),
    );
    await producer.send({ topic: TOPICS.ingress.name, acks: -1, messages });
  };
  const high = (phase: Phase) => (n: number) => send(highProducer, phase, Array<Priority>(n).fill('HIGH'));
  let flip = 0;
  const flood = (n: number) =>
    send(
      floodProducer,
      'mixed',
      Array.from({ length: n }, () => (flip++ % 2 === 0 ? 'NORMAL' : 'LOW')),
    );

  let peakWaiting: number | undefined;
  const backlog = async (): Promise<void> => {
    let total = 0;
    for (const a of agents) {
      const res = await fetch(`${o.dispatcherUrl}/v1/agents/${a.agent_id}/deliveries`, { headers: { authorization: `Bearer ${o.adminToken}` } }).catch(
        () => undefined,
      );
      if (!res?.ok) return; // no flow endpoint on this stack
      const f = (await res.json()) as { waiting: Record<Priority, number> };
      total += f.waiting.HIGH + f.waiting.NORMAL + f.waiting.LOW;
    }
    peakWaiting = Math.max(peakWaiting ?? 0, total);
  };

  const phaseStart: Record<Reported, number> = { idle: 0, mixed: 0, drain: 0 };
  try {
    await drive(o.highRate, 1000, high('warm')); // routes and connections warm, not reported
    phaseStart.idle = Date.now();
    await drive(o.highRate, o.idleS * 1000, high('idle'));
    phaseStart.mixed = Date.now();
    const poller = setInterval(() => void backlog(), 250);
    try {
      await Promise.all([drive(o.highRate, o.durationS * 1000, high('mixed')), drive(o.floodRate, o.durationS * 1000, flood)]);
      const deadline = Date.now() + o.drainS * 1000;
      phaseStart.drain = Date.now();
      const drained = () => (['NORMAL', 'LOW'] as const).every((p) => stream('mixed', p).received >= stream('mixed', p).sent);
      await drive(o.highRate, deadline - Date.now(), high('drain'), drained);
      const pending = () => [...streams.entries()].filter(([k]) => !k.startsWith('warm')).some(([, s]) => s.received < s.sent);
      while (pending() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    } finally {
      clearInterval(poller);
    }
  } finally {
    stopHeartbeats();
    await Promise.all([highProducer, floodProducer].map((p) => p.disconnect().catch(() => undefined)));
    for (const ws of sockets) ws.close();
    await deregister(
      o,
      [...agents, producerAgent].map((a) => a.agent_id),
    );
  }

  const rows: MixRow[] = (
    [
      ['idle', 'HIGH', o.highRate],
      ['mixed', 'HIGH', o.highRate],
      ['drain', 'HIGH', o.highRate],
      ['mixed', 'NORMAL', o.floodRate / 2],
      ['mixed', 'LOW', o.floodRate / 2],
    ] as const
  ).map(([phase, priority, targetRate]) => {
    const s = stream(phase, priority);
    const seconds = Math.max(0.001, (s.lastAt - phaseStart[phase]) / 1000);
    return { phase, priority, targetRate, sent: s.sent, received: s.received, achieved: s.received / seconds, latency: s.samples.summary() };
  });
  return { rows, capacityPerS: (o.agents * o.concurrency * 1000) / o.handlerMs, peakWaiting, quota };
}

/** `--mix`: the run's settings, where the stack is, and whether to print JSON. */
export interface MixBenchOptions extends Omit<MixOptions, 'kafka'> {
  brokers: readonly string[];
  json: boolean;
}

/**
 * `reach bench --mix`: HIGH latency idle and under a NORMAL + LOW backlog, with the backlog's
 * throughput and latency, in one table.
 */
export async function runMixBench(o: MixBenchOptions, print: (text: string) => void): Promise<MixResult> {
  const kafka = createKafka({ brokers: o.brokers, clientId: 'reach-bench-mix', logger: silentLogger });
  const r = await mixLoop({ ...o, kafka });
  if (o.json) {
    print(JSON.stringify({ options: { ...o, adminToken: undefined }, ...r }, null, 2) + '\n');
    return r;
  }
  print(
    `\nreach bench --mix: ${o.agents} agents × max_concurrency ${o.concurrency}, ${o.handlerMs} ms per message (capacity ≈ ${Math.round(r.capacityPerS)} msg/s); ` +
      `HIGH ${o.highRate} msg/s alone for ${o.idleS}s, then with NORMAL+LOW at ${o.floodRate} msg/s for ${o.durationS}s, then alone again while the backlog drains\n\n`,
  );
  print(
    table(
      r.rows.map((x) => ({
        phase: x.phase,
        priority: x.priority,
        'target/s': fmt(x.targetRate, 0),
        sent: x.sent,
        received: x.received,
        'achieved/s': fmt(x.achieved, 0),
        'p50 ms': fmt(x.latency.p50),
        'p95 ms': fmt(x.latency.p95),
        'p99 ms': fmt(x.latency.p99),
        'max ms': fmt(x.latency.max),
      })),
    ),
  );
  const [idle, mixed, drain] = r.rows;
  print(
    `\nHIGH p99: idle ${fmt(idle!.latency.p99)} ms; while the flood arrives ${fmt(mixed!.latency.p99)} ms (${fmt(mixed!.latency.p99 / idle!.latency.p99, 2)} × idle); ` +
      `while the backlog drains ${fmt(drain!.latency.p99)} ms (${fmt(drain!.latency.p99 / idle!.latency.p99, 2)} × idle). R-D9: ≤ 80 ms while a LOW backlog drains\n`,
  );
  print(`peak waiting backlog in the dispatcher: ${r.peakWaiting ?? 'unknown (no flow endpoint)'}\n${r.quota}\n`);
  return r;
}
