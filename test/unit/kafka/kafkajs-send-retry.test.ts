import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

// patches/kafkajs@2.2.4.patch, src/producer/sendMessages.js: a send that spans two brokers, where
// one answers and the other dies, is retried per partition. Unpatched, the retry skipped every
// broker that had answered, so a partition whose leader moved to that broker was never sent and
// the send resolved anyway: acknowledged records lost on a leader failover (found by
// test/integration/zz-cluster/broker-failover.test.ts: 3 of 600 messages).
const require = createRequire(import.meta.url);
const kafkajsRoot = require.resolve('kafkajs').replace(/index\.js$/, '');
const sendMessages = require(`${kafkajsRoot}src/producer/sendMessages.js`) as (deps: unknown) => (args: unknown) => Promise<unknown[]>;
const createRetry = require(`${kafkajsRoot}src/retry/index.js`) as (opts: unknown) => unknown;
const { KafkaJSConnectionError } = require(`${kafkajsRoot}src/errors.js`) as { KafkaJSConnectionError: new (msg: string) => Error };

interface TopicData {
  topic: string;
  partitions: Array<{ partition: number; messages: unknown[] }>;
}

describe('kafkajs sendBatch across a leader failover (patched)', () => {
  it('sends the records of a partition whose leader moved to a broker that already answered', async () => {
    const leaders: Record<number, number> = { 0: 1, 1: 2 }; // partition → broker
    const acknowledged: Array<{ broker: number; partition: number }> = [];
    let brokerTwoDied = false;
    const broker = (nodeId: number) => ({
      nodeId,
      produce: async ({ topicData }: { topicData: TopicData[] }) => {
        if (nodeId === 2 && !brokerTwoDied) {
          await new Promise((r) => setTimeout(r, 20)); // broker 1 answers first
          brokerTwoDied = true;
          leaders[1] = 1; // the controller moves partition 1 to broker 1
          throw new KafkaJSConnectionError('Connection error: connect ECONNREFUSED');
        }
        for (const t of topicData) for (const p of t.partitions) acknowledged.push({ broker: nodeId, partition: p.partition });
        return {
          topics: topicData.map((t) => ({
            topicName: t.topic,
            partitions: t.partitions.map((p) => ({ partition: p.partition, errorCode: 0, baseOffset: '0' })),
          })),
        };
      },
    });
    const brokers: Record<number, ReturnType<typeof broker>> = { 1: broker(1), 2: broker(2) };
    const cluster = {
      refreshMetadataIfNecessary: async () => undefined,
      refreshMetadata: async () => undefined,
      addMultipleTargetTopics: async () => undefined,
      isConnected: () => true,
      removeBroker: () => undefined,
      targetTopics: new Set(['t']),
      findTopicPartitionMetadata: () => [0, 1].map((p) => ({ partitionId: p, leader: leaders[p], replicas: [], isr: [], partitionErrorCode: 0 })),
      findLeaderForPartitions: (_topic: string, partitions: Array<string | number>) =>
        partitions.reduce<Record<number, number[]>>((out, id) => {
          const leader = leaders[Number(id)]!;
          (out[leader] ??= []).push(Number(id));
          return out;
        }, {}),
      findBroker: async ({ nodeId }: { nodeId: string | number }) => brokers[Number(nodeId)],
    };
    const eosManager = {
      isTransactional: () => false,
      getSequence: () => 0,
      updateSequence: () => undefined,
      acquireBrokerLock: async () => undefined,
      releaseBrokerLock: async () => undefined,
      getProducerId: () => -1,
      getProducerEpoch: () => 0,
    };
    const quiet = () => undefined;
    const send = sendMessages({
      logger: { debug: quiet, info: quiet, warn: quiet, error: quiet },
      cluster,
      partitioner: ({ message }: { message: { key: string } }) => Number(message.key),
      eosManager,
      retrier: createRetry({ retries: 3, initialRetryTime: 10, maxRetryTime: 50 }),
    });

    const responses = await send({
      acks: -1,
      topicMessages: [
        {
          topic: 't',
          messages: [
            { key: '0', value: 'a' },
            { key: '1', value: 'b' },
          ],
        },
      ],
    });

    expect(brokerTwoDied).toBe(true);
    expect(acknowledged).toEqual([
      { broker: 1, partition: 0 },
      { broker: 1, partition: 1 },
    ]);
    expect(responses).toHaveLength(2);
  });
});
