import { randomBytes } from 'node:crypto';
import { newMessageId, TOKEN_HEADER } from '@reach/core';
import { SchemaCodec, type StatusBatch } from '@reach/envelope';
import { TOPICS, valueSubject, type Consumer, type Kafka, type Producer } from '@reach/kafka';
import { EnvelopeTemplate, type TemplateFields } from './envelope-template.js';
import type { LatencySummary } from './results.js';
import { deregister, heartbeats, openAgentSocket, raiseQuota, register, type Registered, type StackEndpoints } from './stack.js';
import { drive, Samples } from './stats.js';

export interface RigOptions extends StackEndpoints {
  kafka: Kafka;
  schemaRegistryUrl: string;
  agents: number;
  producers: number;
  payloadBytes: number;
  /** The highest rate the run will offer: the producer's quota is raised above it. */
  maxRate: number;
}

/** One message of the current step, from its send to its DELIVERED event. 0 = not yet. */
interface Track {
  sentAt: number;
  /** Sent in the measured window (not the warm-up). */
  measured: boolean;
  receivedAt: number;
  receives: number;
  deliveredAt: number;
}

export interface StepCounts {
  offered: number;
  received: number;
  redeliveries: number;
  delivered: number;
  receive: LatencySummary;
  deliveredLatency: LatencySummary;
}

const INGRESS_SUBJECT = valueSubject(TOPICS.ingress.name);
const BATCH_SUBJECT = valueSubject(TOPICS.statusBatches.name);

/**
 * The pipeline under load, set up once per run and driven step after step: N agents on
 * WebSockets offering one capability (acking at once), M producers writing pre-encoded
 * envelopes to reach.ingress.v1, and a tap on reach.status.v1 for DELIVERED events. Every
 * message of a step is tracked by id, so each step reports offered, received, redelivered and
 * delivered counts and send → agent receive / send → DELIVERED latencies of its own messages.
 */
export class PipelineRig {
  private tracks = new Map<string, Track>();
  private measuredReceived = 0;
  private measuredDelivered = 0;
  private measuredOffered = 0;
  /** First receives and DELIVERED events of any message of the step, warm-up included. */
  private progressed = 0;
  private deliveredAll = 0;
  private template!: EnvelopeTemplate;
  private readonly traceBase = randomBytes(4).toString('hex');
  private traceCount = 0;
  private next = 0;
  private agents: Registered[] = [];
  private producerAgent!: Registered;
  private sockets: Array<{ close(): void }> = [];
  private producers: Producer[] = [];
  private tap: Consumer | undefined;
  private stopHeartbeats: () => void = () => undefined;
  quota = '';

  private constructor(
    private readonly o: RigOptions,
    private readonly run: string,
    private readonly codec: SchemaCodec,
    private readonly fields: TemplateFields,
  ) {}

  static async open(o: RigOptions): Promise<PipelineRig> {
    const run = randomBytes(3).toString('hex');
    const codec = SchemaCodec.connect(o.schemaRegistryUrl, { maxPayloadBytes: 1 << 20 });
    await codec.init([
      { subject: INGRESS_SUBJECT, schema: 'reach.v1.Envelope' },
      { subject: BATCH_SUBJECT, schema: 'reach.v1.StatusBatch' },
    ]);
    const payload = Buffer.from(JSON.stringify({ data: 'x'.repeat(Math.max(0, o.payloadBytes - 12)) }));
    const rig = new PipelineRig(o, run, codec, {
      subject: INGRESS_SUBJECT,
      capability: `bench_echo_${run}`,
      producer: `bench.producer.${run}`,
      priority: 'NORMAL',
      payload,
    });
    try {
      await rig.setUp();
    } catch (err) {
      await rig.close();
      throw err;
    }
    return rig;
  }

  private async setUp(): Promise<void> {
    const { o, run } = this;
    this.template = await EnvelopeTemplate.build(this.codec, this.fields);
    for (let i = 0; i < o.agents; i++) {
      this.agents.push(
        await register(o, {
          agent_id: `bench.agent.${run}.${i}`,
          agent_type: 'bench',
          endpoints: { ws: o.wsUrl },
          capabilities: [{ name: this.fields.capability, mode: 'handle' }],
          metadata: { max_concurrency: 10_000, domain: 'default' },
          ttl_s: 60,
        }),
      );
    }
    this.producerAgent = await register(o, {
      agent_id: this.fields.producer,
      agent_type: 'bench',
      capabilities: [],
      metadata: { max_concurrency: 1 },
      ttl_s: 60,
    });
    // Well above the highest rate: the quota must never be what limits the benchmark.
    this.quota = await raiseQuota(o, this.producerAgent.agent_id, Math.max(1000, o.maxRate * 2));
    // The agents ack at once: the bench measures the pipeline, not a handler.
    const onDeliver = (d: { messageId: string }, answer: () => void) => {
      this.received(d.messageId);
      answer();
    };
    for (const a of this.agents) this.sockets.push(await openAgentSocket(o, a, onDeliver));
    this.stopHeartbeats = heartbeats(o, [...this.agents, this.producerAgent]);
    await this.openTap();
    for (let i = 0; i < o.producers; i++) {
      const p = o.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
      await p.connect();
      this.producers.push(p);
    }
  }

  /** Watches DELIVERED events from now on (a throwaway group, no commits). */
  private async openTap(): Promise<void> {
    const admin = this.o.kafka.admin();
    await admin.connect();
    const ends = await admin.fetchTopicOffsets(TOPICS.statusBatches.name);
    await admin.disconnect();
    // DELIVERED latency is the dispatcher's event time, not when the tap reads it: the tap can
    // wait for data up to 100 ms (instead of polling the broker 200 times a second when idle).
    const tap = this.o.kafka.consumer({ groupId: this.tapGroup(), maxWaitTimeInMs: 100 });
    this.tap = tap;
    await tap.connect();
    await tap.subscribe({ topic: TOPICS.statusBatches.name, fromBeginning: true });
    const joined = new Promise<void>((resolve) => tap.on(tap.events.GROUP_JOIN, () => resolve()));
    await tap.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        for (const m of batch.messages) {
          if (!m.value) continue;
          // the stages pack a request's events into one record: one decode per ~tens of events
          const { events } = await this.codec.decode<StatusBatch>(BATCH_SUBJECT, m.value);
          for (const ev of events) if (ev.state === 'DELIVERED') this.delivered(ev.message_id, ev.at);
        }
      },
    });
    for (const p of ends) tap.seek({ topic: TOPICS.statusBatches.name, partition: p.partition, offset: p.offset });
    await joined;
  }

  private received(messageId: string): void {
    const t = this.tracks.get(messageId);
    if (!t) return; // a previous step's straggler
    if (t.receives++ === 0) {
      t.receivedAt = Date.now();
      this.progressed++;
      if (t.measured) this.measuredReceived++;
    }
  }

  private delivered(messageId: string, at: number): void {
    const t = this.tracks.get(messageId);
    if (!t || t.deliveredAt !== 0) return;
    t.deliveredAt = at;
    this.progressed++;
    this.deliveredAll++;
    if (t.measured) this.measuredDelivered++;
  }

  /** Forgets the previous step's messages: whatever of them arrives later is not counted anywhere. */
  startStep(): void {
    this.tracks = new Map();
    this.measuredOffered = this.measuredReceived = this.measuredDelivered = this.progressed = this.deliveredAll = 0;
  }

  /** Offers `rate` msg/s for `durationMs`, one producer.send per 10 ms tick; `measured` false for the warm-up. */
  async load(rate: number, durationMs: number, measured: boolean): Promise<number> {
    return drive(rate, durationMs, async (n) => {
      const now = Date.now();
      const messages = new Array<{ key: string; value: Buffer; headers: Record<string, string> }>(n);
      for (let i = 0; i < n; i++) {
        const id = newMessageId(now);
        let value = this.template.record(id, this.traceId(), now);
        if (!value) {
          this.template = await EnvelopeTemplate.build(this.codec, this.fields, now);
          value = this.template.record(id, this.traceId(), now)!;
        }
        this.tracks.set(id, { sentAt: now, measured, receivedAt: 0, receives: 0, deliveredAt: 0 });
        messages[i] = { key: id, value, headers: { [TOKEN_HEADER]: this.producerAgent.token } };
      }
      if (measured) this.measuredOffered += n;
      const producer = this.producers[this.next++ % this.producers.length]!;
      await producer.send({ topic: TOPICS.ingress.name, acks: -1, messages });
    });
  }

  private traceId(): string {
    return this.traceBase + (this.traceCount++).toString(16).padStart(24, '0');
  }

  /** Measured messages not yet both received and DELIVERED. */
  outstanding(): number {
    return 2 * this.measuredOffered - this.measuredReceived - this.measuredDelivered;
  }

  /** DELIVERED events seen so far of any of the step's messages (a CPU window's work, warm-up included). */
  deliveredSoFar(): number {
    return this.deliveredAll;
  }

  /**
   * Waits after the last send until every measured message arrived, nothing of the step
   * progressed for `quietMs` (warm-up messages count: a backlog of them is still progress), or
   * `maxMs` passed: a step the pipeline could not keep up with is reported with what arrived,
   * not waited on for ever. Returns the seconds waited.
   */
  async drain(maxMs: number, quietMs = 5000): Promise<number> {
    const started = Date.now();
    let last = this.progressed;
    let lastProgress = started;
    while (this.outstanding() > 0 && Date.now() - started < maxMs && Date.now() - lastProgress < quietMs) {
      await new Promise((r) => setTimeout(r, 50));
      if (this.progressed > last) lastProgress = Date.now();
      last = this.progressed;
    }
    return (Date.now() - started) / 1000;
  }

  counts(): StepCounts {
    const receive = new Samples();
    const delivered = new Samples();
    let offered = 0;
    let redeliveries = 0;
    for (const t of this.tracks.values()) {
      if (!t.measured) continue;
      offered++;
      if (t.receives > 0) receive.add(t.receivedAt - t.sentAt);
      if (t.receives > 1) redeliveries += t.receives - 1;
      if (t.deliveredAt > 0) delivered.add(t.deliveredAt - t.sentAt);
    }
    return { offered, received: receive.count, redeliveries, delivered: delivered.count, receive: receive.summary(), deliveredLatency: delivered.summary() };
  }

  /** Up to `n` measured messages that were received and delivered, spread over the step, with their times. */
  sample(n: number): Array<{ messageId: string; sentAt: number; receivedAt: number; deliveredAt: number }> {
    const done = [...this.tracks.entries()].filter(([, t]) => t.measured && t.receives > 0 && t.deliveredAt > 0);
    const every = Math.max(1, Math.floor(done.length / n));
    return done
      .filter((_, i) => i % every === 0)
      .slice(0, n)
      .map(([messageId, t]) => ({ messageId, sentAt: t.sentAt, receivedAt: t.receivedAt, deliveredAt: t.deliveredAt }));
  }

  async close(): Promise<void> {
    this.stopHeartbeats();
    await this.tap?.disconnect().catch(() => undefined);
    await Promise.all(this.producers.map((p) => p.disconnect().catch(() => undefined)));
    for (const ws of this.sockets) ws.close();
    const ids = [...this.agents.map((a) => a.agent_id), ...(this.producerAgent ? [this.producerAgent.agent_id] : [])];
    await deregister(this.o, ids);
    if (this.tap) {
      const admin = this.o.kafka.admin();
      await admin.connect();
      await admin.deleteGroups([this.tapGroup()]).catch(() => undefined);
      await admin.disconnect();
    }
  }

  private tapGroup(): string {
    return `reach.bench.${this.run}`;
  }
}
