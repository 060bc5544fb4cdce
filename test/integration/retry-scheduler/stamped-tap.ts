import type { Consumer, Kafka } from 'kafkajs';
import type { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import { uniq } from '../../helpers/env.js';

/** A record read back with the time the broker stamped it (the producer's create time). */
export interface Stamped {
  readonly partition: number;
  readonly offset: string;
  readonly timestamp: number;
  readonly key: string | null;
  readonly headers: Record<string, string>;
  readonly value: Record<string, unknown> | undefined;
}

/**
 * Like the shared TopicTap (reads a topic from "now" on, decoded through the registry), but
 * keeps each record's timestamp: "not re-published before it was due" is a statement about
 * when the record was written, not about when a test happened to see it.
 */
export class StampedTap {
  readonly records: Stamped[] = [];
  private consumer: Consumer | undefined;

  constructor(
    private readonly kafka: Kafka,
    private readonly topic: string,
    private readonly registry: SchemaRegistry,
  ) {}

  async open(): Promise<this> {
    const admin = this.kafka.admin();
    await admin.connect();
    const ends = await admin.fetchTopicOffsets(this.topic);
    await admin.disconnect();
    const consumer = this.kafka.consumer({ groupId: uniq('stamped-tap'), maxWaitTimeInMs: 50 });
    this.consumer = consumer;
    await consumer.connect();
    await consumer.subscribe({ topic: this.topic, fromBeginning: true });
    const joined = new Promise<void>((resolve) => consumer.on(consumer.events.GROUP_JOIN, () => resolve()));
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        const value =
          message.value && message.value[0] === 0
            ? ((await this.registry.decode(message.value).catch(() => undefined)) as Record<string, unknown> | undefined)
            : undefined;
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(message.headers ?? {})) {
          const first = Array.isArray(v) ? v[0] : v;
          if (first !== undefined) headers[k] = first.toString();
        }
        this.records.push({ partition, offset: message.offset, timestamp: Number(message.timestamp), key: message.key?.toString() ?? null, headers, value });
      },
    });
    for (const p of ends) consumer.seek({ topic: this.topic, partition: p.partition, offset: p.offset });
    await joined;
    return this;
  }

  async waitFor(pred: (r: Stamped) => boolean, timeoutMs = 20_000): Promise<Stamped> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.records.find(pred);
      if (hit) return hit;
      if (Date.now() > deadline) throw new Error(`no matching record on ${this.topic} within ${timeoutMs} ms (saw ${this.records.length})`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  async close(): Promise<void> {
    await this.consumer?.disconnect();
  }
}
