import { randomBytes } from 'node:crypto';
import { waitForLeaders, type Kafka } from '@reach/kafka';
import { drive, Samples } from './stats.js';

export interface LoopResult {
  name: string;
  targetRate: number;
  sent: number;
  received: number;
  seconds: number;
  latency: ReturnType<Samples['summary']>;
}

/**
 * The baseline: a raw kafkajs produce→consume loop on the same broker, same partitions and
 * acks as the pipeline, no Agent-Reach in between. Every pipeline figure is read against it.
 */
export async function rawLoop(kafka: Kafka, opts: { rate: number; durationMs: number; payloadBytes: number; partitions: number }): Promise<LoopResult> {
  const topic = `reach.bench.raw.${randomBytes(4).toString('hex')}`;
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: opts.partitions, replicationFactor: 1 }], waitForLeaders: false });
  await waitForLeaders(admin, [topic]);
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  const consumer = kafka.consumer({ groupId: `${topic}.g`, maxWaitTimeInMs: 5 });
  const samples = new Samples();
  let received = 0;
  try {
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
          received++;
          samples.add(now - Number(m.value!.readBigUInt64BE(0)));
        }
      },
    });
    await joined;
    const body = randomBytes(opts.payloadBytes);
    const started = performance.now();
    const sent = await drive(opts.rate, opts.durationMs, async (n) => {
      const ts = BigInt(Date.now());
      const messages = Array.from({ length: n }, (_, i) => {
        const value = Buffer.allocUnsafe(8 + body.length);
        value.writeBigUInt64BE(ts, 0);
        body.copy(value, 8);
        return { key: String(i), value };
      });
      await producer.send({ topic, acks: -1, messages });
    });
    const deadline = Date.now() + 15_000;
    while (received < sent && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    return {
      name: 'raw kafkajs produce→consume',
      targetRate: opts.rate,
      sent,
      received,
      seconds: (performance.now() - started) / 1000,
      latency: samples.summary(),
    };
  } finally {
    await consumer.disconnect().catch(() => undefined);
    await producer.disconnect().catch(() => undefined);
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  }
}
