import { Kafka, logLevel, type Consumer, type IHeaders } from 'kafkajs';
import { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import { stack, uniq } from './env.js';

/**
 * Outside-client helpers for integration tests: plain kafkajs and the Confluent registry client,
 * the way an agent written by someone else would talk to Agent-Reach (never the project's own
 * Kafka package, so the tests check the wire contract, not our helpers).
 */
export function plainKafka(): Kafka {
  return new Kafka({ clientId: uniq('test'), brokers: stack.brokers, logLevel: logLevel.NOTHING });
}

export function registryClient(): SchemaRegistry {
  return new SchemaRegistry({ host: stack.schemaRegistryUrl });
}

export interface Tapped<T> {
  readonly partition: number;
  readonly offset: string;
  /** The time the broker stamped on the record (the producer's create time). */
  readonly timestamp: number;
  readonly key: string | null;
  readonly headers: Record<string, string>;
  readonly raw: Buffer | null;
  readonly value: T | undefined;
}

/**
 * Reads a topic from "now" on: remembers the end offsets before anything is produced, joins a
 * fresh consumer group and starts each partition exactly there, so a test sees every record
 * produced after `open()` and nothing older.
 */
export class TopicTap<T = unknown> {
  readonly records: Array<Tapped<T>> = [];
  private consumer: Consumer | undefined;
  private waiters: Array<() => void> = [];
  /** Per partition, the offset after the last record read. */
  private readonly positions = new Map<number, bigint>();

  /**
   * `unpack` turns a decoded value into the items a test looks at (a record packing several),
   * each becoming one entry of `records` with its own key, at the record's partition and offset.
   */
  constructor(
    private readonly kafka: Kafka,
    private readonly topic: string,
    private readonly registry: SchemaRegistry | null = registryClient(),
    private readonly unpack?: (value: unknown) => Array<{ key: string; value: T }>,
  ) {}

  async open(): Promise<this> {
    const admin = this.kafka.admin();
    await admin.connect();
    const ends = await admin.fetchTopicOffsets(this.topic);
    await admin.disconnect();
    const consumer = this.kafka.consumer({ groupId: uniq('tap'), maxWaitTimeInMs: 50 });
    this.consumer = consumer;
    await consumer.connect();
    await consumer.subscribe({ topic: this.topic, fromBeginning: true });
    const joined = new Promise<void>((resolve) => consumer.on(consumer.events.GROUP_JOIN, () => resolve()));
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        let value: T | undefined;
        if (this.registry && message.value && message.value[0] === 0) {
          value = (await this.registry.decode(message.value).catch(() => undefined)) as T | undefined;
        }
        const base = { partition, offset: message.offset, timestamp: Number(message.timestamp), headers: flatten(message.headers), raw: message.value };
        if (this.unpack && value !== undefined) {
          for (const item of this.unpack(value)) this.records.push({ ...base, key: item.key, value: item.value });
        } else {
          this.records.push({ ...base, key: message.key?.toString() ?? null, value });
        }
        this.positions.set(partition, BigInt(message.offset) + 1n);
        for (const w of this.waiters.splice(0)) w();
      },
    });
    for (const p of ends) {
      // read from here: what came before open() counts as read
      if (!this.positions.has(p.partition)) this.positions.set(p.partition, BigInt(p.offset));
      consumer.seek({ topic: this.topic, partition: p.partition, offset: p.offset });
    }
    await joined;
    return this;
  }

  /**
   * Resolves with the first record matching `pred`, or rejects after `timeoutMs`. On a tap that
   * unpacks (status events: one message's events sit on several partitions, in no order across
   * them), it then also reads every partition up to where it ended when the match was seen, so
   * whatever was produced before the matching event (an earlier state of its message) is in
   * `records` too.
   */
  async waitFor(pred: (r: Tapped<T>) => boolean, timeoutMs = 20_000): Promise<Tapped<T>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.records.find(pred);
      if (hit) {
        if (this.unpack) await this.catchUp(Math.max(deadline, Date.now() + 10_000));
        return hit;
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no matching record on ${this.topic} within ${timeoutMs} ms (saw ${this.records.length})`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 250));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /**
   * Reads every partition up to its end offset as of now: whatever was produced before this
   * call is then in `records` (a test proves a record was *not* produced by an earlier step).
   */
  async readToEnd(timeoutMs = 20_000): Promise<void> {
    await this.catchUp(Date.now() + timeoutMs);
  }

  /** Waits until every partition is read up to its end offset as of now. */
  private async catchUp(deadline: number): Promise<void> {
    const admin = this.kafka.admin();
    await admin.connect();
    const ends = await admin.fetchTopicOffsets(this.topic).finally(() => admin.disconnect());
    const behind = () => ends.some((p) => (this.positions.get(p.partition) ?? 0n) < BigInt(p.high));
    while (behind()) {
      if (Date.now() > deadline) throw new Error(`${this.topic}: not caught up with the end offsets in time`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  async close(): Promise<void> {
    await this.consumer?.disconnect();
  }
}

/** Where the stages' status events go: StatusBatch records, several events each. */
export const STATUS_BATCH_TOPIC = 'reach.status-batches.v1';

/**
 * A tap on the stages' status events: each packed event is one entry (key = its message_id),
 * as if every event were a record of its own.
 */
export function statusTap<T = Record<string, unknown>>(kafka: Kafka, registry: SchemaRegistry = registryClient()): TopicTap<T> {
  return new TopicTap<T>(kafka, STATUS_BATCH_TOPIC, registry, (value) =>
    (value as { events: Array<T & { message_id: string }> }).events.map((e) => ({ key: e.message_id, value: e })),
  );
}

function flatten(h: IHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h ?? {})) {
    const first = Array.isArray(v) ? v[0] : v;
    if (first !== undefined) out[k] = first.toString();
  }
  return out;
}
