import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CompressionTypes,
  ConfigResourceTypes,
  Kafka,
  Partitioners,
  logLevel,
  type Admin,
  type Consumer,
  type ConsumerConfig,
  type EachMessagePayload,
  type IHeaders,
  type Producer,
  type ProducerConfig,
} from 'kafkajs';
import { silentLogger } from '@reach/core';
import { ensureTopics, waitForLeaders, type TopicSpec } from '@reach/kafka';
import { stack, uniq } from '../../helpers/env.js';

/**
 * kafkajs 2.2.4 against the real Apache Kafka 4.x broker of the local stack (docs/design.md §7): every
 * admin, producer and consumer-group API the services use, on plain kafkajs, so a broker upgrade
 * that drops a protocol version kafkajs needs fails here first. Each test uses its own topics
 * and groups (random names) and deletes them afterwards.
 */

/**
 * kafkajs logs, at ERROR, responses these tests provoke on purpose (waitForLeaders probes a new
 * partition with ListOffsets until its leader serves it); anything else is printed.
 */
const EXPECTED_ERRORS = /Topic creation errors|group is rebalancing/;
const PROBE = /^Response ListOffsets/;

const kafka = new Kafka({
  clientId: uniq('kafkajs-compat'),
  brokers: stack.brokers,
  logLevel: logLevel.ERROR,
  logCreator:
    () =>
    ({ namespace, log }) => {
      const { message, error } = log as { message: string; error?: string };
      if (!EXPECTED_ERRORS.test(String(error)) && !PROBE.test(message)) console.error(`kafkajs ${namespace}: ${message} ${error ?? ''}`);
    },
  connectionTimeout: 5_000,
  requestTimeout: 30_000,
  retry: { initialRetryTime: 200, maxRetryTime: 3_000, retries: 10 },
});

let admin: Admin;
const createdTopics = new Set<string>();
const createdGroups = new Set<string>();
const clients: Array<Producer | Consumer> = [];

function producer(config: ProducerConfig = {}): Producer {
  const p = kafka.producer({ allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner, ...config });
  clients.push(p);
  return p;
}

function consumer(config: Omit<ConsumerConfig, 'groupId'> & { groupId?: string } = {}): Consumer {
  const groupId = config.groupId ?? uniq('compat-group');
  createdGroups.add(groupId);
  const c = kafka.consumer({ sessionTimeout: 10_000, heartbeatInterval: 1_000, maxWaitTimeInMs: 200, allowAutoTopicCreation: false, ...config, groupId });
  clients.push(c);
  return c;
}

async function waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 45_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Creates topics with random names (registered for deletion) and waits for their leaders. */
async function topics(n: number, numPartitions: number, configEntries: Array<{ name: string; value: string }> = []): Promise<string[]> {
  const names = Array.from({ length: n }, () => uniq('compat'));
  for (const name of names) createdTopics.add(name);
  const created = await admin.createTopics({
    topics: names.map((topic) => ({ topic, numPartitions, replicationFactor: 1, configEntries })),
    waitForLeaders: false,
  });
  expect(created).toBe(true);
  await waitForLeaders(admin, names);
  return names;
}

async function groupOffsets(groupId: string, topic: string): Promise<Map<number, string>> {
  const res = await admin.fetchOffsets({ groupId, topics: [topic] });
  return new Map(res[0]!.partitions.map((p) => [p.partition, p.offset]));
}

function headerString(headers: IHeaders | undefined, key: string): string | undefined {
  const v = headers?.[key];
  const first = Array.isArray(v) ? v[0] : v;
  return first === undefined ? undefined : first.toString();
}

interface Seen {
  topic: string;
  partition: number;
  offset: string;
  key: string | null;
  value: string;
  headers: IHeaders | undefined;
}

function collect(into: Seen[]): (p: EachMessagePayload) => Promise<void> {
  return async ({ topic, partition, message }) => {
    into.push({ topic, partition, offset: message.offset, key: message.key?.toString() ?? null, value: message.value!.toString(), headers: message.headers });
  };
}

beforeAll(async () => {
  admin = kafka.admin();
  await admin.connect();
});

afterAll(async () => {
  for (const c of clients) await c.disconnect().catch(() => undefined);
  if (createdGroups.size > 0) {
    const existing = new Set((await admin.listGroups()).groups.map((g) => g.groupId));
    const groups = [...createdGroups].filter((g) => existing.has(g));
    if (groups.length > 0) await admin.deleteGroups(groups).catch(() => undefined);
  }
  if (createdTopics.size > 0) {
    await admin.deleteTopics({ topics: [...createdTopics], timeout: 30_000 });
    const gone = [...createdTopics];
    await waitFor('the test topics to be deleted', async () => {
      const left = new Set(await admin.listTopics());
      return gone.every((t) => !left.has(t));
    });
  }
  await admin.disconnect();
}, 120_000);

describe('kafkajs 2.2.4 ↔ Kafka 4.x: admin', () => {
  it('describes the cluster', async () => {
    const cluster = await admin.describeCluster();
    expect(cluster.brokers.length).toBeGreaterThanOrEqual(1);
    expect(cluster.controller).not.toBeNull();
    expect(cluster.clusterId).toMatch(/\S+/);
  });

  it('createTopics (with configs), listTopics, fetchTopicMetadata, describeConfigs, createPartitions, fetchTopicOffsets, fetchOffsets, deleteTopics', async () => {
    const compact = uniq('compat-compact');
    const plain = uniq('compat-plain');
    createdTopics.add(compact).add(plain);
    const created = await admin.createTopics({
      waitForLeaders: false,
      topics: [
        {
          topic: compact,
          numPartitions: 2,
          replicationFactor: 1,
          configEntries: [
            { name: 'cleanup.policy', value: 'compact' },
            { name: 'min.cleanable.dirty.ratio', value: '0.1' },
          ],
        },
        { topic: plain, numPartitions: 1, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: String(3 * 86_400_000) }] },
      ],
    });
    expect(created).toBe(true);
    await waitForLeaders(admin, [compact, plain]);
    // Creating an existing topic is reported, not fatal.
    expect(await admin.createTopics({ topics: [{ topic: plain, numPartitions: 1, replicationFactor: 1 }] })).toBe(false);

    const listed = new Set(await admin.listTopics());
    expect(listed.has(compact) && listed.has(plain)).toBe(true);

    const meta = await admin.fetchTopicMetadata({ topics: [compact, plain] });
    const partitionsOf = (t: string) => meta.topics.find((m) => m.name === t)!.partitions;
    expect(
      partitionsOf(compact)
        .map((p) => p.partitionId)
        .sort(),
    ).toEqual([0, 1]);
    expect(partitionsOf(plain)).toHaveLength(1);
    for (const p of [...partitionsOf(compact), ...partitionsOf(plain)]) {
      expect(p.leader).toBeGreaterThanOrEqual(0);
      expect(p.replicas).toHaveLength(1);
    }

    const configs = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [
        { type: ConfigResourceTypes.TOPIC, name: compact, configNames: ['cleanup.policy', 'min.cleanable.dirty.ratio'] },
        { type: ConfigResourceTypes.TOPIC, name: plain, configNames: ['cleanup.policy', 'retention.ms'] },
      ],
    });
    const cfg = (t: string, key: string) => configs.resources.find((r) => r.resourceName === t)!.configEntries.find((e) => e.configName === key)?.configValue;
    expect(cfg(compact, 'cleanup.policy')).toBe('compact');
    expect(cfg(compact, 'min.cleanable.dirty.ratio')).toBe('0.1');
    expect(cfg(plain, 'cleanup.policy')).toBe('delete');
    expect(cfg(plain, 'retention.ms')).toBe(String(3 * 86_400_000));

    await admin.createPartitions({ topicPartitions: [{ topic: compact, count: 4 }] });
    await waitForLeaders(admin, [compact]);
    expect((await admin.fetchTopicMetadata({ topics: [compact] })).topics[0]!.partitions).toHaveLength(4);

    // Offsets: produce to known partitions, read the watermarks. Idempotent, because a new
    // partition can still answer NOT_LEADER for a moment, and kafkajs then resends the whole
    // request: a plain producer would write partition 0's records twice (seen in CI: high 6).
    const p = producer({ idempotent: true, maxInFlightRequests: 1 });
    await p.connect();
    await p.send({ topic: compact, acks: -1, messages: [0, 0, 0, 3, 3].map((partition, i) => ({ partition, key: `k${i}`, value: `v${i}` })) });
    const offsets = await admin.fetchTopicOffsets(compact);
    const high = new Map(offsets.map((o) => [o.partition, o]));
    expect(offsets).toHaveLength(4);
    expect(high.get(0)).toMatchObject({ high: '3', low: '0', offset: '3' });
    expect(high.get(1)).toMatchObject({ high: '0', low: '0' });
    expect(high.get(3)).toMatchObject({ high: '2', low: '0' });

    // Group offsets: none yet (-1), then what the admin set.
    const groupId = uniq('compat-admin-group');
    createdGroups.add(groupId);
    expect([...(await groupOffsets(groupId, compact)).values()]).toEqual(['-1', '-1', '-1', '-1']);
    await admin.setOffsets({
      groupId,
      topic: compact,
      partitions: [
        { partition: 0, offset: '2' },
        { partition: 3, offset: '1' },
      ],
    });
    const set = await groupOffsets(groupId, compact);
    expect(set.get(0)).toBe('2');
    expect(set.get(3)).toBe('1');
    expect(set.get(1)).toBe('-1');

    await admin.deleteTopics({ topics: [plain], timeout: 30_000 });
    await waitFor(`${plain} to disappear`, async () => !(await admin.listTopics()).includes(plain));
    createdTopics.delete(plain);
  }, 120_000);
});

describe('kafkajs 2.2.4 ↔ Kafka 4.x: producer', () => {
  it('plain and idempotent producers (acks -1) deliver keys, headers and gzip-compressed values; sendBatch spans topics', async () => {
    const [a, b, c] = await topics(3, 3);
    const plain = producer();
    const idem = producer({ idempotent: true, maxInFlightRequests: 1 });
    await plain.connect();
    await idem.connect();

    const sent: Array<{ topic: string; key: string; value: string; via: string; gzip: boolean }> = [];
    const msg = (topic: string, via: string, i: number, gzip: boolean) => {
      const m = { topic, key: `key-${i % 5}`, value: `${via}-${i}-${'x'.repeat(i % 3 === 0 ? 2000 : 10)}`, via, gzip };
      sent.push(m);
      return {
        key: m.key,
        value: m.value,
        headers: { 'reach-token': `tok-${i}`, traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`, via, seq: String(i) },
      };
    };

    const r1 = await plain.send({ topic: a!, acks: -1, messages: Array.from({ length: 10 }, (_, i) => msg(a!, 'plain', i, false)) });
    const r2 = await plain.send({
      topic: a!,
      acks: -1,
      compression: CompressionTypes.GZIP,
      messages: Array.from({ length: 10 }, (_, i) => msg(a!, 'plain-gzip', i, true)),
    });
    const r3 = await idem.send({ topic: b!, acks: -1, messages: Array.from({ length: 10 }, (_, i) => msg(b!, 'idem', i, false)) });
    const r4 = await idem.send({
      topic: b!,
      acks: -1,
      compression: CompressionTypes.GZIP,
      messages: Array.from({ length: 10 }, (_, i) => msg(b!, 'idem-gzip', i, true)),
    });
    for (const r of [...r1, ...r2, ...r3, ...r4]) expect(r.errorCode).toBe(0);

    // One request, several topics, on both producers.
    const batch1 = await idem.sendBatch({
      acks: -1,
      compression: CompressionTypes.GZIP,
      topicMessages: [a!, b!, c!].map((topic) => ({ topic, messages: Array.from({ length: 4 }, (_, i) => msg(topic, 'idem-batch', i, true)) })),
    });
    const batch2 = await plain.sendBatch({
      acks: -1,
      topicMessages: [a!, c!].map((topic) => ({ topic, messages: Array.from({ length: 3 }, (_, i) => msg(topic, 'plain-batch', i, false)) })),
    });
    expect(new Set(batch1.map((r) => r.topicName))).toEqual(new Set([a, b, c]));
    expect(new Set(batch2.map((r) => r.topicName))).toEqual(new Set([a, c]));
    for (const r of [...batch1, ...batch2]) expect(r.errorCode).toBe(0);

    // Read everything back.
    const seen: Seen[] = [];
    const cons = consumer();
    await cons.connect();
    await cons.subscribe({ topics: [a!, b!, c!], fromBeginning: true });
    await cons.run({ eachMessage: collect(seen) });
    await waitFor(`${sent.length} records`, () => seen.length >= sent.length);
    expect(seen).toHaveLength(sent.length);

    const key = (x: { topic: string; value: string }) => `${x.topic}|${x.value}`;
    const byValue = new Map(seen.map((s) => [key(s), s]));
    expect(byValue.size).toBe(sent.length);
    for (const m of sent) {
      const s = byValue.get(key(m));
      expect(s, key(m)).toBeDefined();
      expect(s!.key).toBe(m.key);
      expect(headerString(s!.headers, 'via')).toBe(m.via);
      expect(headerString(s!.headers, 'reach-token')).toMatch(/^tok-\d+$/);
      expect(headerString(s!.headers, 'traceparent')).toBe(`00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`);
    }
    // Same key → same partition (the default partitioner), and order per partition follows offsets.
    for (const topic of [a!, b!, c!]) {
      const partitionsOfKey = new Map<string, Set<number>>();
      for (const s of seen.filter((x) => x.topic === topic)) {
        partitionsOfKey.set(s.key!, (partitionsOfKey.get(s.key!) ?? new Set()).add(s.partition));
      }
      for (const set of partitionsOfKey.values()) expect(set.size).toBe(1);
    }
    // Per partition, records arrive in the order each producer sent them.
    for (const topic of [a!, b!, c!]) {
      for (const partition of [0, 1, 2]) {
        const inPartition = seen.filter((x) => x.topic === topic && x.partition === partition);
        expect(inPartition.map((x) => Number(x.offset))).toEqual(inPartition.map((_, i) => i));
        for (const via of new Set(inPartition.map((x) => headerString(x.headers, 'via')))) {
          const seqs = inPartition.filter((x) => headerString(x.headers, 'via') === via).map((x) => Number(headerString(x.headers, 'seq')));
          expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
        }
      }
    }
  }, 120_000);
});

describe('kafkajs 2.2.4 ↔ Kafka 4.x: consumer groups', () => {
  it('joins, consumes from the beginning, and keeps heartbeating through a slow eachMessage', async () => {
    const [topic] = await topics(1, 1);
    const p = producer();
    await p.connect();
    await p.send({ topic: topic!, acks: -1, messages: Array.from({ length: 5 }, (_, i) => ({ key: `k${i}`, value: `v${i}` })) });

    const cons = consumer({ sessionTimeout: 6_000, heartbeatInterval: 500 });
    let joins = 0;
    let heartbeatsDuringSlow = 0;
    let slowRunning = false;
    let rebalances = 0;
    cons.on(cons.events.GROUP_JOIN, () => void joins++);
    cons.on(cons.events.REBALANCING, () => void rebalances++);
    cons.on(cons.events.HEARTBEAT, () => {
      if (slowRunning) heartbeatsDuringSlow++;
    });
    const seen: string[] = [];
    await cons.connect();
    await cons.subscribe({ topics: [topic!], fromBeginning: true });
    await cons.run({
      eachMessage: async ({ message, heartbeat }) => {
        if (message.value!.toString() === 'v2') {
          // Work that outlasts the session timeout (6 s): only heartbeats keep the member in.
          slowRunning = true;
          const until = Date.now() + 8_000;
          while (Date.now() < until) {
            await new Promise((r) => setTimeout(r, 250));
            await heartbeat();
          }
          slowRunning = false;
        }
        seen.push(message.value!.toString());
      },
    });
    await waitFor('all 5 records', () => seen.length >= 5, 60_000);
    expect(seen).toEqual(['v0', 'v1', 'v2', 'v3', 'v4']);
    expect(heartbeatsDuringSlow).toBeGreaterThanOrEqual(8);
    expect(joins).toBe(1);
    expect(rebalances).toBe(0);
  }, 120_000);

  it('manual commitOffsets are visible to admin.fetchOffsets, and a restarted consumer resumes from them', async () => {
    const [topic] = await topics(1, 2);
    const groupId = uniq('compat-commit');
    const p = producer({ idempotent: true, maxInFlightRequests: 1 });
    await p.connect();
    await p.send({ topic: topic!, acks: -1, messages: Array.from({ length: 10 }, (_, i) => ({ partition: i % 2, value: `first-${i}` })) });

    const first = consumer({ groupId });
    const seen1: Seen[] = [];
    await first.connect();
    await first.subscribe({ topics: [topic!], fromBeginning: true });
    await first.run({ autoCommit: false, eachMessage: collect(seen1) });
    await waitFor('10 records', () => seen1.length >= 10);
    // Commit only part of each partition: the next offset to read is 3 on p0, 5 (= all) on p1.
    await first.commitOffsets([
      { topic: topic!, partition: 0, offset: '3' },
      { topic: topic!, partition: 1, offset: '5' },
    ]);
    const committed = await groupOffsets(groupId, topic!);
    expect(committed.get(0)).toBe('3');
    expect(committed.get(1)).toBe('5');
    await first.disconnect();
    // Nothing else was committed on disconnect (autoCommit off).
    expect(await groupOffsets(groupId, topic!)).toEqual(committed);

    await p.send({
      topic: topic!,
      acks: -1,
      messages: [
        { partition: 0, value: 'second-0' },
        { partition: 1, value: 'second-1' },
      ],
    });
    const second = consumer({ groupId });
    const seen2: Seen[] = [];
    await second.connect();
    await second.subscribe({ topics: [topic!], fromBeginning: true });
    await second.run({ eachMessage: collect(seen2) });
    await waitFor('the 4 records after the committed offsets', () => seen2.length >= 4);
    const p0 = seen2.filter((s) => s.partition === 0);
    const p1 = seen2.filter((s) => s.partition === 1);
    expect(p0.map((s) => s.offset)).toEqual(['3', '4', '5']);
    expect(p0.map((s) => s.value)).toEqual(['first-6', 'first-8', 'second-0']);
    expect(p1.map((s) => [s.offset, s.value])).toEqual([['5', 'second-1']]);
    // autoCommit (default) commits what was consumed.
    await waitFor('auto-committed offsets', async () => {
      const o = await groupOffsets(groupId, topic!);
      return o.get(0) === '6' && o.get(1) === '6';
    });
  }, 120_000);

  it('rebalances when a second consumer joins: both get partitions, every record consumed exactly once by the group', async () => {
    const [topic] = await topics(1, 4);
    const groupId = uniq('compat-rebalance');
    const p = producer({ idempotent: true, maxInFlightRequests: 1 });
    await p.connect();
    const wave = (name: string) => Array.from({ length: 40 }, (_, i) => ({ partition: i % 4, key: `${name}-${i}`, value: `${name}-${i}` }));
    await p.send({ topic: topic!, acks: -1, messages: wave('w1') });

    const assignment = new Map<string, number[]>();
    const consumed: Array<{ member: string; partition: number; value: string }> = [];
    const start = async (member: string) => {
      const c = consumer({ groupId, sessionTimeout: 10_000, heartbeatInterval: 500, rebalanceTimeout: 20_000 });
      c.on(c.events.GROUP_JOIN, (e) => {
        assignment.set(member, e.payload.memberAssignment[topic!] ?? []);
      });
      await c.connect();
      await c.subscribe({ topics: [topic!], fromBeginning: true });
      await c.run({
        autoCommitThreshold: 1,
        eachMessage: async ({ partition, message }) => {
          consumed.push({ member, partition, value: message.value!.toString() });
        },
      });
      return c;
    };

    await start('A');
    await waitFor('A to own all 4 partitions', () => assignment.get('A')?.length === 4);
    await waitFor('wave 1 consumed', () => consumed.length >= 40);
    await waitFor('wave 1 committed', async () => [...(await groupOffsets(groupId, topic!)).values()].every((o) => o === '10'));

    await start('B');
    await waitFor(
      'a rebalance giving both members partitions',
      () => (assignment.get('B')?.length ?? 0) > 0 && (assignment.get('A')?.length ?? 0) > 0 && assignment.get('A')!.length + assignment.get('B')!.length === 4,
    );
    const a = assignment.get('A')!;
    const b = assignment.get('B')!;
    expect([...a, ...b].sort()).toEqual([0, 1, 2, 3]);
    expect(a.filter((x) => b.includes(x))).toEqual([]);

    await p.send({ topic: topic!, acks: -1, messages: wave('w2') });
    await waitFor('wave 2 consumed', () => consumed.length >= 80, 60_000);

    const values = consumed.map((c) => c.value).sort();
    const expected = [...wave('w1'), ...wave('w2')].map((m) => m.value).sort();
    expect(values).toEqual(expected); // none lost, none twice
    const w2 = consumed.filter((c) => c.value.startsWith('w2-'));
    // After the rebalance, each member read exactly its own partitions.
    for (const c of w2) expect(assignment.get(c.member)).toContain(c.partition);
    expect(new Set(w2.map((c) => c.member))).toEqual(new Set(['A', 'B']));
  }, 150_000);

  it('pause and resume a partition', async () => {
    const [topic] = await topics(1, 2);
    const p = producer();
    await p.connect();
    const cons = consumer();
    const seen: Seen[] = [];
    await cons.connect();
    await cons.subscribe({ topics: [topic!], fromBeginning: true });
    await cons.run({ eachMessage: collect(seen) });
    await p.send({
      topic: topic!,
      acks: -1,
      messages: [
        { partition: 0, value: 'warm-0' },
        { partition: 1, value: 'warm-1' },
      ],
    });
    await waitFor('warm-up records', () => seen.length >= 2);

    cons.pause([{ topic: topic!, partitions: [0] }]);
    expect(cons.paused()).toEqual([{ topic, partitions: [0] }]);
    // Produce to the paused partition first, then to the live one: once the live record is
    // consumed, the paused one (written earlier) would have been fetched too were it not paused.
    await p.send({ topic: topic!, acks: -1, messages: [{ partition: 0, value: 'paused-0' }] });
    await p.send({ topic: topic!, acks: -1, messages: [{ partition: 1, value: 'live-1' }] });
    await waitFor('the live record', () => seen.some((s) => s.value === 'live-1'));
    await p.send({ topic: topic!, acks: -1, messages: [{ partition: 1, value: 'live-2' }] });
    await waitFor('a second live record', () => seen.some((s) => s.value === 'live-2'));
    expect(seen.some((s) => s.value === 'paused-0')).toBe(false);

    cons.resume([{ topic: topic!, partitions: [0] }]);
    expect(cons.paused()).toEqual([]);
    await waitFor('the paused record after resume', () => seen.some((s) => s.value === 'paused-0'));
    expect(seen.filter((s) => s.value === 'paused-0')).toHaveLength(1);
  }, 120_000);

  it('seek re-reads a partition from an earlier offset', async () => {
    const [topic] = await topics(1, 1);
    const p = producer();
    await p.connect();
    await p.send({ topic: topic!, acks: -1, messages: Array.from({ length: 8 }, (_, i) => ({ value: `s${i}` })) });
    const cons = consumer();
    const seen: Seen[] = [];
    await cons.connect();
    await cons.subscribe({ topics: [topic!], fromBeginning: true });
    await cons.run({ eachMessage: collect(seen) });
    await waitFor('8 records', () => seen.length >= 8);
    expect(seen.map((s) => s.offset)).toEqual(['0', '1', '2', '3', '4', '5', '6', '7']);

    cons.seek({ topic: topic!, partition: 0, offset: '5' });
    await waitFor('the records from offset 5 again', () => seen.length >= 11);
    expect(seen.slice(8).map((s) => [s.offset, s.value])).toEqual([
      ['5', 's5'],
      ['6', 's6'],
      ['7', 's7'],
    ]);
  }, 120_000);
});

describe('@reach/kafka ensureTopics against the real broker', () => {
  const retention = async (topic: string) => {
    const res = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['cleanup.policy', 'retention.ms', 'min.cleanable.dirty.ratio'] }],
    });
    return Object.fromEntries(res.resources[0]!.configEntries.map((e) => [e.configName, e.configValue]));
  };
  const partitions = async (topic: string) => (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0]!.partitions.length;

  it('creates, is idempotent, alters config and grows partitions (never shrinks)', async () => {
    const compacted: TopicSpec = { name: uniq('compat-ensure-agents'), schema: null, compacted: true, retentionMs: -1, partitions: 2, description: 'test' };
    const events: TopicSpec = { name: uniq('compat-ensure-events'), schema: null, compacted: false, retentionMs: 86_400_000, description: 'test' };
    createdTopics.add(compacted.name).add(events.name);
    const opts = { partitions: 3, replicationFactor: 1, logger: silentLogger };

    await ensureTopics(admin, { ...opts, topics: [compacted, events] });
    expect(await partitions(compacted.name)).toBe(2);
    expect(await partitions(events.name)).toBe(3);
    expect(await retention(compacted.name)).toMatchObject({ 'cleanup.policy': 'compact', 'retention.ms': '-1', 'min.cleanable.dirty.ratio': '0.1' });
    expect(await retention(events.name)).toMatchObject({ 'cleanup.policy': 'delete', 'retention.ms': '86400000' });

    // Twice: nothing changes, nothing fails.
    await ensureTopics(admin, { ...opts, topics: [compacted, events] });
    expect(await partitions(compacted.name)).toBe(2);
    expect(await partitions(events.name)).toBe(3);
    expect(await retention(events.name)).toMatchObject({ 'cleanup.policy': 'delete', 'retention.ms': '86400000' });

    // Changed declarations: config altered, partitions grown.
    await ensureTopics(admin, {
      ...opts,
      partitions: 5,
      topics: [
        { ...compacted, partitions: 4 },
        { ...events, retentionMs: 2 * 86_400_000 },
      ],
    });
    await waitFor('grown partitions', async () => (await partitions(compacted.name)) === 4 && (await partitions(events.name)) === 5);
    await waitFor('altered retention', async () => (await retention(events.name))['retention.ms'] === String(2 * 86_400_000));
    expect(await retention(compacted.name)).toMatchObject({ 'cleanup.policy': 'compact' });

    // Fewer declared partitions than present: left alone (Kafka cannot shrink a topic).
    await ensureTopics(admin, { ...opts, partitions: 1, topics: [{ ...compacted, partitions: 1 }, events] });
    expect(await partitions(compacted.name)).toBe(4);
    expect(await partitions(events.name)).toBe(5);
    expect(await retention(events.name)).toMatchObject({ 'retention.ms': '86400000' });
  }, 120_000);

  it('two concurrent ensureTopics calls on the same new topics both succeed', async () => {
    const spec: TopicSpec = { name: uniq('compat-ensure-race'), schema: null, compacted: false, retentionMs: 3_600_000, partitions: 2, description: 'test' };
    createdTopics.add(spec.name);
    const opts = { partitions: 3, replicationFactor: 1, logger: silentLogger, topics: [spec] };
    await Promise.all([ensureTopics(admin, opts), ensureTopics(admin, opts)]);
    expect(await partitions(spec.name)).toBe(2);
  }, 120_000);
});
