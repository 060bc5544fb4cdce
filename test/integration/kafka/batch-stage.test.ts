import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Admin, Producer } from 'kafkajs';
import { silentLogger } from '@reach/core';
import { createKafka, createProducer, runBatchStage, waitForLeaders, type InRecord } from '@reach/kafka';
import { uniq, stack } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';

// The batch stage's `together` mode (packages/kafka/src/batch-stage.ts) against the real broker:
// the partition batches of one fetch reach the handler in one call, every record exactly once
// and in order within its partition, and the offsets are committed only after the call.
const kafka = createKafka({ brokers: stack.brokers, clientId: uniq('batch-stage-test'), logger: silentLogger });
let admin: Admin;
let producer: Producer;
const topics: string[] = [];

beforeAll(async () => {
  admin = kafka.admin();
  await admin.connect();
  producer = await createProducer(kafka);
});

afterAll(async () => {
  await producer.disconnect();
  await admin.deleteTopics({ topics }).catch(() => undefined);
  await admin.disconnect();
});

describe('runBatchStage together', () => {
  it('hands the partitions of a fetch to one call, each record once, in partition order, then commits', async () => {
    const input = uniq('it.batch');
    await admin.createTopics({ topics: [{ topic: input, numPartitions: 6 }], waitForLeaders: false });
    await waitForLeaders(admin, [input]);
    topics.push(input);
    // Written before the stage starts: its first fetch finds all six partitions full.
    const perPartition = 50;
    for (let p = 0; p < 6; p++) {
      await producer.send({
        topic: input,
        messages: Array.from({ length: perPartition }, (_, i) => ({ partition: p, key: `k${p}`, value: `${p}:${i}` })),
      });
    }
    const calls: InRecord[][] = [];
    const groupId = uniq('g');
    const running = await runBatchStage({
      kafka,
      producer,
      groupId,
      topics: [input],
      logger: silentLogger,
      partitionsConsumedConcurrently: 6,
      together: true,
      handleBatch: async (records) => {
        calls.push([...records]);
        return [];
      },
      onFatal: (err) => {
        throw err;
      },
    });
    try {
      await eventually('all consumed', async () => calls.flat().length >= 6 * perPartition, 30_000);
      const seen = calls.flat().map((r) => r.value!.toString());
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen.length).toBe(6 * perPartition);
      for (let p = 0; p < 6; p++) {
        const order = seen.filter((v) => v.startsWith(`${p}:`)).map((v) => Number(v.split(':')[1]));
        expect(order).toEqual(Array.from({ length: perPartition }, (_, i) => i));
      }
      // Several partitions in one call (the point of `together`): the first fetch held all six.
      expect(Math.max(...calls.map((c) => new Set(c.map((r) => r.partition)).size))).toBeGreaterThan(1);
      await eventually(
        'offsets committed',
        async () => {
          const offsets = await admin.fetchOffsets({ groupId, topics: [input] });
          return offsets[0]!.partitions.every((p) => Number(p.offset) === perPartition);
        },
        20_000,
      );
    } finally {
      await running.stop();
    }
  });
});
