import { randomUUID } from 'node:crypto';
import type { Logger } from '@reach/core';
import { createProducer, ensureTopics, type Kafka, type Producer, type TopicSpec } from '@reach/kafka';
import type { LogAppender } from './registry.js';
import type { LogRecord } from './state.js';

/**
 * The registry's durable store: one compacted, single-partition Kafka topic (like Confluent's
 * `_schemas`). One partition keeps a total order of writes, so replaying it rebuilds exactly
 * the state the registry had.
 */
export function schemasTopic(name: string): TopicSpec {
  return { name, schema: null, compacted: true, retentionMs: -1, partitions: 1, description: 'development schema registry state (compacted)' };
}

const REPLAY_TIMEOUT_MS = 60_000;

/** Creates the topic if missing (idempotent). */
export async function ensureSchemasTopic(kafka: Kafka, topic: string, logger: Logger): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await ensureTopics(admin, { partitions: 1, replicationFactor: 1, logger, topics: [schemasTopic(topic)] });
  } finally {
    await admin.disconnect();
  }
}

/**
 * Reads the topic from its beginning up to the high watermark seen at start and hands every
 * record to `apply`, in order. kafkajs has no manual partition assignment, so this joins a
 * throwaway consumer group (unique id, never commits) that the broker forgets once it is empty.
 * Returns the number of records read.
 */
export async function replay(kafka: Kafka, topic: string, logger: Logger, apply: (record: LogRecord) => void): Promise<number> {
  const admin = kafka.admin();
  await admin.connect();
  let low: bigint;
  let high: bigint;
  try {
    const offsets = await admin.fetchTopicOffsets(topic);
    const p0 = offsets.find((o) => o.partition === 0);
    if (!p0) throw new Error(`topic ${topic} has no partition 0`);
    low = BigInt(p0.low);
    high = BigInt(p0.high);
  } finally {
    await admin.disconnect();
  }
  if (high <= low) return 0;

  const consumer = kafka.consumer({ groupId: `reach-dev-schema-registry-replay-${randomUUID()}`, allowAutoTopicCreation: false, maxWaitTimeInMs: 1000 });
  let count = 0;
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`replaying ${topic} did not reach offset ${high} within ${REPLAY_TIMEOUT_MS} ms`)), REPLAY_TIMEOUT_MS);
      const done = (err?: Error) => {
        clearTimeout(timer);
        if (err) reject(err);
        else resolve();
      };
      consumer.on(consumer.events.CRASH, (event) => {
        const { error, restart } = event.payload as { error: Error; restart: boolean };
        if (!restart) done(error);
      });
      consumer
        .run({
          autoCommit: false,
          eachBatch: async ({ batch }) => {
            for (const m of batch.messages) {
              if (BigInt(m.offset) >= high) break;
              if (m.key === null) continue;
              apply({ key: m.key.toString('utf8'), value: m.value === null ? null : m.value.toString('utf8') });
              count++;
            }
            // The last record before the high watermark is never compacted away, so reaching
            // it is the end of the replay.
            if (BigInt(batch.lastOffset()) + 1n >= high) done();
          },
        })
        .catch((err: unknown) => done(err instanceof Error ? err : new Error(String(err))));
    });
  } finally {
    await consumer.disconnect();
  }
  logger.info({ records: count, highWatermark: high.toString() }, 'schema registry state replayed');
  return count;
}

/** Appends records with acks=-1; resolves once the broker has acknowledged all of them. */
export class SchemaLogWriter implements LogAppender {
  private constructor(
    private readonly producer: Producer,
    private readonly topic: string,
  ) {}

  static async open(kafka: Kafka, topic: string): Promise<SchemaLogWriter> {
    return new SchemaLogWriter(await createProducer(kafka), topic);
  }

  async append(records: readonly LogRecord[]): Promise<void> {
    if (records.length === 0) return;
    await this.producer.send({ topic: this.topic, acks: -1, messages: records.map((r) => ({ key: r.key, value: r.value })) });
  }

  close(): Promise<void> {
    return this.producer.disconnect();
  }
}
