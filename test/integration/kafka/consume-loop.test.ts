import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Admin, Producer } from 'kafkajs';
import { NonRetryableError, ReachError, silentLogger } from '@reach/core';
import { createKafka, createProducer, runBatchStage, runStage, waitForLeaders, type InRecord, type OutRecord, type RunningStage } from '@reach/kafka';
import { uniq, stack } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';

// The consume loop every stage runs (packages/kafka/src/consume.ts) against the real broker:
// outputs are produced before offsets are committed, poison records are handed to onPoison
// and the partition moves on, dependency failures are retried, nothing is lost across a restart.
const kafka = createKafka({ brokers: stack.brokers, clientId: uniq('consume-loop-test'), logger: silentLogger });
let admin: Admin;
let producer: Producer;
const topics: string[] = [];

async function topic(partitions = 3): Promise<string> {
  const name = uniq('it.consume');
  await admin.createTopics({ topics: [{ topic: name, numPartitions: partitions }], waitForLeaders: false });
  await waitForLeaders(admin, [name]);
  topics.push(name);
  return name;
}

async function readAll(name: string, expected: number, timeoutMs = 20_000): Promise<string[]> {
  // A short fetch wait: disconnect waits for the fetch in flight (kafkajs's default, 5 s, at the head of the log).
  const consumer = kafka.consumer({ groupId: uniq('reader'), maxWaitTimeInMs: 100 });
  const values: string[] = [];
  await consumer.connect();
  await consumer.subscribe({ topic: name, fromBeginning: true });
  await consumer.run({ eachMessage: async ({ message }) => void values.push(message.value!.toString()) });
  const deadline = Date.now() + timeoutMs;
  while (values.length < expected && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  // give stray extras a moment to show up, so "exactly" assertions mean something
  await new Promise((r) => setTimeout(r, 500));
  await consumer.disconnect();
  return values;
}

async function committed(groupId: string, name: string): Promise<number> {
  const offsets = await admin.fetchOffsets({ groupId, topics: [name] });
  return offsets[0]!.partitions.reduce((sum, p) => sum + Math.max(0, Number(p.offset)), 0);
}

function stage(
  groupId: string,
  input: string,
  handle: (r: InRecord) => Promise<readonly OutRecord[]>,
  onPoison?: (r: InRecord, e: ReachError) => OutRecord[],
  commitIntervalMs = 200,
): Promise<RunningStage> {
  return runStage({
    kafka,
    producer,
    groupId,
    topics: [input],
    logger: silentLogger,
    commitIntervalMs,
    handle,
    onPoison: onPoison ?? (() => []),
    onFatal: (err) => {
      throw err;
    },
  });
}

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

describe('runStage', () => {
  it('produces every output and commits exactly the consumed offsets', async () => {
    const [input, output] = [await topic(), await topic()];
    const groupId = uniq('g');
    const running = await stage(groupId, input, async (r) => [{ topic: output, key: r.key, value: Buffer.from(`out-${r.value!.toString()}`) }]);
    await producer.send({ topic: input, acks: -1, messages: Array.from({ length: 100 }, (_, i) => ({ key: String(i), value: String(i) })) });
    const out = await readAll(output, 100);
    expect(out.sort()).toEqual(Array.from({ length: 100 }, (_, i) => `out-${i}`).sort());
    await running.stop();
    expect(await committed(groupId, input)).toBe(100);
  });

  it('a graceful stop commits everything done, even between timer commits, so the next owner replays nothing', async () => {
    const [input, output] = [await topic(), await topic()];
    const groupId = uniq('g');
    // The timer would commit only after a minute: whatever is committed comes from the stop.
    const running = await stage(groupId, input, async (r) => [{ topic: output, key: r.key, value: r.value }], undefined, 60_000);
    await producer.send({ topic: input, acks: -1, messages: Array.from({ length: 50 }, (_, i) => ({ key: String(i), value: String(i) })) });
    expect(await readAll(output, 50)).toHaveLength(50);
    await running.stop();
    expect(await committed(groupId, input)).toBe(50);
  });

  it('hands a poison record to onPoison and keeps consuming the partition', async () => {
    const [input, output] = [await topic(1), await topic(1)];
    const running = await stage(
      uniq('g'),
      input,
      async (r) => {
        if (r.value!.toString() === 'poison') throw new NonRetryableError('INVALID_ENVELOPE', 'bad record');
        return [{ topic: output, key: null, value: r.value }];
      },
      (r, e) => [{ topic: output, key: null, value: Buffer.from(`dlq:${e.code}:${r.value!.toString()}`) }],
    );
    await producer.send({ topic: input, acks: -1, messages: ['a', 'poison', 'b'].map((v) => ({ value: v })) });
    const out = await readAll(output, 3);
    expect(out).toEqual(['a', 'dlq:4101:poison', 'b']);
    await running.stop();
  });

  it('retries a record after a dependency failure, without losing or duplicating the records before it', async () => {
    const [input, output] = [await topic(1), await topic(1)];
    let failures = 0;
    const running = await stage(uniq('g'), input, async (r) => {
      if (r.value!.toString() === 'flaky' && failures < 2) {
        failures++;
        throw new ReachError('DEPENDENCY_UNAVAILABLE', 'redis is down');
      }
      return [{ topic: output, key: null, value: r.value }];
    });
    await producer.send({ topic: input, acks: -1, messages: ['1', '2', 'flaky', '3'].map((v) => ({ value: v })) });
    const out = await readAll(output, 4, 40_000);
    expect(failures).toBe(2);
    expect(out).toEqual(['1', '2', 'flaky', '3']);
    await running.stop();
  });

  it('replays what was produced but not committed when a consumer dies, so nothing is lost', async () => {
    const [input, output] = [await topic(1), await topic(1)];
    const groupId = uniq('g');
    const seen: string[] = [];
    const handle = async (r: InRecord) => {
      seen.push(r.value!.toString());
      return [{ topic: output, key: null, value: r.value }];
    };
    const first = await stage(groupId, input, handle);
    await producer.send({ topic: input, acks: -1, messages: ['x', 'y'].map((v) => ({ value: v })) });
    while (seen.length < 2) await new Promise((r) => setTimeout(r, 20));
    // Die before the commit timer fires: leave the group without committing.
    await first.consumer.disconnect();
    const second = await stage(groupId, input, handle);
    await producer.send({ topic: input, acks: -1, messages: [{ value: 'z' }] });
    const out = await readAll(output, 3);
    expect(new Set(out)).toEqual(new Set(['x', 'y', 'z']));
    await second.stop();
    expect(await committed(groupId, input)).toBe(3);
  });
});

// The batch stage's `together` mode and linger (packages/kafka/src/batch-stage.ts): the partition batches of
// one fetch reach the handler in one call, every record exactly once and in order within its
// partition, and the offsets are committed only after the call.
describe('runBatchStage: together, linger', () => {
  async function newTopic(prefix: string, numPartitions: number): Promise<string> {
    const topic = uniq(prefix);
    await admin.createTopics({ topics: [{ topic, numPartitions }], waitForLeaders: false });
    await waitForLeaders(admin, [topic]);
    topics.push(topic);
    return topic;
  }

  /** A batch stage on `input` that records every handler call's records and produces nothing. */
  async function recordingStage(
    input: string,
    options: Pick<Parameters<typeof runBatchStage>[0], 'partitionsConsumedConcurrently' | 'together' | 'fetchWait'> & {
      groupId?: string;
    },
  ) {
    const calls: InRecord[][] = [];
    const { groupId = uniq('g'), ...rest } = options;
    const running = await runBatchStage({
      kafka,
      producer,
      groupId,
      topics: [input],
      logger: silentLogger,
      ...rest,
      handleBatch: async (records) => {
        calls.push([...records]);
        return [];
      },
      onFatal: (err) => {
        throw err;
      },
    });
    return { calls, running };
  }

  it('hands the partitions of a fetch to one call, each record once, in partition order, then commits', async () => {
    const input = await newTopic('it.batch', 6);
    // Written before the stage starts: its first fetch finds all six partitions full.
    const perPartition = 50;
    for (let p = 0; p < 6; p++) {
      await producer.send({
        topic: input,
        messages: Array.from({ length: perPartition }, (_, i) => ({ partition: p, key: `k${p}`, value: `${p}:${i}` })),
      });
    }
    const groupId = uniq('g');
    const { calls, running } = await recordingStage(input, { groupId, partitionsConsumedConcurrently: 6, together: true });
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

  it('lingers after a fetch that reached the head of the log, so a trickle is handled in fewer, larger calls', async () => {
    const input = await newTopic('it.linger', 1);
    const { calls, running } = await recordingStage(input, { fetchWait: { maxWaitMs: 1000, lingerMs: 400 } });
    try {
      // 30 records, one every 50 ms (1.5 s): without the linger each fetch brings one or two.
      for (let i = 0; i < 30; i++) {
        await producer.send({ topic: input, messages: [{ key: 'k', value: String(i) }] });
        await new Promise((r) => setTimeout(r, 50));
      }
      await eventually('all consumed', async () => calls.flat().length >= 30, 20_000);
      expect(calls.flat().map((r) => Number(r.value!.toString()))).toEqual(Array.from({ length: 30 }, (_, i) => i));
      // A call at most every ~400 ms over ~1.5 s of sends (plus the first record's own call).
      expect(calls.length).toBeLessThanOrEqual(7);
    } finally {
      await running.stop();
    }
  });

  it('does not linger while a backlog waits: only at the head of the log', async () => {
    const input = await newTopic('it.linger-backlog', 1);
    // ~4 MiB written before the stage starts: several fetches of at most 1 MiB each.
    const value = 'x'.repeat(100_000);
    for (let i = 0; i < 4; i++)
      await producer.send({ topic: input, messages: Array.from({ length: 10 }, (_, j) => ({ key: 'k', value: `${i * 10 + j}:${value}` })) });
    const { calls, running } = await recordingStage(input, { fetchWait: { maxWaitMs: 1000, lingerMs: 30_000 } });
    try {
      // Lingering 30 s between the fetches of the backlog would miss this by far.
      await eventually('the backlog consumed', async () => calls.flat().length >= 40, 20_000);
      expect(calls.length).toBeGreaterThan(1);
    } finally {
      await running.stop();
    }
  });
});
