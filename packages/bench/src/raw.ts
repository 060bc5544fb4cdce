import { randomBytes } from 'node:crypto';
import { waitForLeaders, type Admin, type Consumer, type Kafka, type Producer } from '@reach/kafka';
import type { StepResult } from './results.js';
import { drive, Samples } from './stats.js';

/**
 * The yardstick: a raw kafkajs produce→consume loop on the same broker, same partitions and
 * acks as the pipeline, no Agent-Reach in between. Every pipeline latency is printed next to
 * it, measured in the same run at the same rate. Opened once per run (topic, producer, joined
 * consumer) and measured at each step's rate; dropped with its topic and group at the end.
 */
export class RawLoop {
  private samples = new Samples();
  private received = 0;
  /** Records stamped before this (a previous step's stragglers) are not counted. */
  private countFrom = Number.POSITIVE_INFINITY;

  private constructor(
    private readonly admin: Admin,
    private readonly topic: string,
    private readonly producer: Producer,
    private readonly consumer: Consumer,
    private readonly body: Buffer,
  ) {}

  static async open(kafka: Kafka, o: { payloadBytes: number; partitions: number }): Promise<RawLoop> {
    const topic = `reach.bench.raw.${randomBytes(4).toString('hex')}`;
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: o.partitions, replicationFactor: 1 }], waitForLeaders: false });
    await waitForLeaders(admin, [topic]);
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    const consumer = kafka.consumer({ groupId: `${topic}.g`, maxWaitTimeInMs: 5 });
    const loop = new RawLoop(admin, topic, producer, consumer, randomBytes(o.payloadBytes));
    await producer.connect();
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const joined = new Promise<void>((resolve) => consumer.on(consumer.events.GROUP_JOIN, () => resolve()));
    // A throwaway group: no commits (kafkajs's autoCommit would add ~35 ms per fetch cycle;
    // the stages commit from a timer instead).
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        const now = Date.now();
        for (const m of batch.messages) {
          const sentAt = Number(m.value!.readBigUInt64BE(0));
          if (sentAt < loop.countFrom) continue;
          loop.received++;
          loop.samples.add(now - sentAt);
        }
      },
    });
    await joined;
    // Paused between measurements: an idle consumer polling every 5 ms would load the broker
    // (and the bench) while the pipeline is being measured.
    consumer.pause([{ topic }]);
    return loop;
  }

  /** Produces at `rate` for `durationMs`, waits (bounded) for the last records, returns the latencies. */
  async measure(rate: number, durationMs: number): Promise<StepResult['raw']> {
    this.samples = new Samples();
    this.received = 0;
    this.countFrom = Date.now();
    this.consumer.resume([{ topic: this.topic }]);
    await new Promise((r) => setTimeout(r, 100)); // the fetch loop picks the partitions up again
    const started = performance.now();
    const sent = await drive(rate, durationMs, async (n) => {
      const ts = BigInt(Date.now());
      const messages = Array.from({ length: n }, (_, i) => {
        const value = Buffer.allocUnsafe(8 + this.body.length);
        value.writeBigUInt64BE(ts, 0);
        this.body.copy(value, 8);
        return { key: String(i), value };
      });
      await this.producer.send({ topic: this.topic, acks: -1, messages });
    });
    const deadline = Date.now() + 15_000;
    while (this.received < sent && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    this.countFrom = Number.POSITIVE_INFINITY;
    this.consumer.pause([{ topic: this.topic }]);
    return { ...this.samples.summary(), sent, received: this.received, durationS: (performance.now() - started) / 1000 };
  }

  async close(): Promise<void> {
    await this.consumer.disconnect().catch(() => undefined);
    await this.producer.disconnect().catch(() => undefined);
    await this.admin.deleteTopics({ topics: [this.topic] }).catch(() => undefined);
    await this.admin.deleteGroups([`${this.topic}.g`]).catch(() => undefined);
    await this.admin.disconnect();
  }
}
