import { describe, expect, it } from 'vitest';
import { KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError } from 'kafkajs';
import { describeReplication, notThereYet, type Admin } from '../../../packages/kafka/dist/index.js';

// `reach up --brokers 3` describes its topics right after creating them. A broker that has not
// loaded a new topic yet answers UNKNOWN_TOPIC_OR_PARTITION, and kafkajs's own retries can give
// up on it first (CI, 5 December: `reach up failed: This server does not host this
// topic-partition`). Such an answer is waited out; any other failure is not.

const UNKNOWN_TOPIC = { type: 'UNKNOWN_TOPIC_OR_PARTITION', code: 3, retriable: true, message: 'This server does not host this topic-partition' };
const NOT_AUTHORIZED = { type: 'TOPIC_AUTHORIZATION_FAILED', code: 29, retriable: false, message: 'Not authorized to access topics' };

/** A broker's answer as kafkajs raises it (its typings take an Error; it reads type, code, retriable, message). */
function answered(answer: object): Error {
  return new KafkaJSProtocolError(answer as Error);
}

function gaveUp(answer: object): Error {
  return new KafkaJSNumberOfRetriesExceeded(answered(answer), { retryCount: 5, retryTime: 4000 });
}

/** An admin whose describeConfigs fails with `failures` in turn, then answers. */
function adminFailing(failures: Error[]) {
  const calls = { describeConfigs: 0 };
  const admin = {
    fetchTopicMetadata: async () => ({
      topics: [{ name: 't', partitions: [{ partitionId: 0, leader: 1, replicas: [1, 2, 3], isr: [1, 2, 3] }] }],
    }),
    describeConfigs: async () => {
      const failure = failures[calls.describeConfigs++];
      if (failure) throw failure;
      return {
        resources: [
          {
            resourceName: 't',
            configEntries: [
              { configName: 'min.insync.replicas', configValue: '2' },
              { configName: 'unclean.leader.election.enable', configValue: 'false' },
            ],
          },
        ],
      };
    },
  } as unknown as Admin;
  return { admin, calls };
}

describe('notThereYet', () => {
  it('is a retriable broker answer, also when kafkajs gave up on it', () => {
    expect(notThereYet(answered(UNKNOWN_TOPIC))).toBe(true);
    expect(notThereYet(gaveUp(UNKNOWN_TOPIC))).toBe(true);
  });

  it('is not an answer that waiting cannot change, nor a plain error', () => {
    expect(notThereYet(answered(NOT_AUTHORIZED))).toBe(false);
    expect(notThereYet(gaveUp(NOT_AUTHORIZED))).toBe(false);
    expect(notThereYet(new Error('boom'))).toBe(false);
    expect(notThereYet('boom')).toBe(false);
  });
});

describe('describeReplication', () => {
  it('waits out a broker that does not know the topic yet', async () => {
    const { admin, calls } = adminFailing([gaveUp(UNKNOWN_TOPIC), gaveUp(UNKNOWN_TOPIC)]);
    const [t] = await describeReplication(admin, ['t'], 5_000);
    expect(calls.describeConfigs).toBe(3);
    expect(t).toMatchObject({ topic: 't', minInsyncReplicas: 2, uncleanLeaderElection: false });
    expect(t!.partitions).toEqual([{ partition: 0, leader: 1, replicas: [1, 2, 3], isr: [1, 2, 3] }]);
  });

  it('fails at once on an answer that waiting cannot change', async () => {
    const { admin, calls } = adminFailing([gaveUp(NOT_AUTHORIZED)]);
    await expect(describeReplication(admin, ['t'], 5_000)).rejects.toThrow(/Not authorized/);
    expect(calls.describeConfigs).toBe(1);
  });

  it('gives up after its timeout', async () => {
    const { admin } = adminFailing(Array.from({ length: 100 }, () => gaveUp(UNKNOWN_TOPIC)));
    await expect(describeReplication(admin, ['t'], 300)).rejects.toThrow(/does not host/);
  });
});
