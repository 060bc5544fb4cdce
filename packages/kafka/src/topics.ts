import type { Admin, ITopicConfig } from 'kafkajs';
import type { Logger } from '@reach/core';

/**
 * Every topic of docs/design.md §9, as code: created idempotently at start (and by `reach up`) with its
 * partition count, cleanup policy and retention. `schema` names the Avro record its values
 * carry; the subject is `<topic>-value` (TopicNameStrategy).
 */
export interface TopicSpec {
  readonly name: string;
  readonly schema: string | null;
  readonly compacted: boolean;
  readonly retentionMs: number;
  /** A fixed partition count, else REACH_TOPIC_PARTITIONS. */
  readonly partitions?: number;
  readonly description: string;
}

const DAY = 24 * 3600 * 1000;

export const TOPICS = {
  ingress: {
    name: 'reach.ingress.v1',
    schema: 'reach.v1.Envelope',
    compacted: false,
    retentionMs: 7 * DAY,
    description: 'envelopes produced by agents (public contract, docs/design.md §2)',
  },
  pending: {
    name: 'reach.pending.v1',
    schema: 'reach.v1.Envelope',
    compacted: false,
    retentionMs: 7 * DAY,
    description: 'validated, accepted messages waiting for a route',
  },
  routed: {
    name: 'reach.routed.v1',
    schema: 'reach.v1.RoutedDelivery',
    compacted: false,
    retentionMs: 3 * DAY,
    description: 'one routing decision per attempt, keyed by agent_id',
  },
  retry: {
    name: 'reach.retry.v1',
    schema: 'reach.v1.RetryRequest',
    compacted: false,
    retentionMs: 3 * DAY,
    description: 'failed attempts waiting for their backoff',
  },
  dlq: {
    name: 'reach.dlq.v1',
    schema: 'reach.v1.DeadLetter',
    compacted: false,
    retentionMs: 30 * DAY,
    description: 'dead letters, stored and replayed by the dead-letter service',
  },
  status: {
    name: 'reach.status.v1',
    schema: 'reach.v1.StatusEvent',
    compacted: false,
    retentionMs: 7 * DAY,
    description: 'single status events (key message_id), from outside producers and tools; folded by the tracker',
  },
  poison: {
    name: 'reach.poison.v1',
    schema: null,
    compacted: false,
    retentionMs: 30 * DAY,
    partitions: 1,
    description:
      'records the dead-letter stage itself could never store, as they were consumed (key, value, headers) plus reach-poison-* headers (error, service, source topic/partition/offset); read with any Kafka client, re-produce to the source topic once fixed',
  },
  statusBatches: {
    name: 'reach.status-batches.v1',
    schema: 'reach.v1.StatusBatch',
    compacted: false,
    retentionMs: 7 * DAY,
    description: "every state change of every message, packed per produce request (one record per stage's request), folded by the tracker",
  },
  agents: {
    name: 'reach.agents.v1',
    schema: 'reach.v1.AgentRecord',
    compacted: true,
    retentionMs: -1,
    description: 'the registry change feed (compacted, key agent_id)',
  },
  presence: {
    name: 'reach.presence.v1',
    schema: 'reach.v1.Presence',
    compacted: true,
    retentionMs: -1,
    description: 'which dispatcher instance holds each agent (compacted, key agent_id)',
  },
  grants: {
    name: 'reach.grants.v1',
    schema: 'reach.v1.Grant',
    compacted: true,
    retentionMs: -1,
    partitions: 1,
    description: 'cross-domain grants from the registry (compacted, key grant_id; tombstone = revoked)',
  },
  alerts: {
    name: 'reach.alerts.v1',
    schema: 'reach.v1.Alert',
    compacted: false,
    retentionMs: 14 * DAY,
    partitions: 1,
    description: 'operator alerts (rule fallback notify_admin, DLQ sweeps), also logged',
  },
} as const satisfies Record<string, TopicSpec>;

export type TopicKey = keyof typeof TOPICS;

/** Subject of a topic's values under the TopicNameStrategy. */
export function valueSubject(topic: string): string {
  return `${topic}-value`;
}

/** (subject, schema) pairs for every topic that carries Avro values. */
export function topicSchemaBindings(): Array<{ subject: string; schema: string }> {
  return Object.values(TOPICS as Record<string, TopicSpec>)
    .filter((t) => t.schema !== null)
    .map((t) => ({ subject: valueSubject(t.name), schema: t.schema! }));
}

function topicConfig(spec: TopicSpec, minInsyncReplicas: number | undefined): Array<{ name: string; value: string }> {
  const entries = [
    { name: 'cleanup.policy', value: spec.compacted ? 'compact' : 'delete' },
    { name: 'retention.ms', value: String(spec.retentionMs) },
    // An out-of-sync replica never becomes leader: that would silently drop acknowledged records.
    { name: 'unclean.leader.election.enable', value: 'false' },
  ];
  if (minInsyncReplicas !== undefined) entries.push({ name: 'min.insync.replicas', value: String(minInsyncReplicas) });
  if (spec.compacted) {
    entries.push({ name: 'min.cleanable.dirty.ratio', value: '0.1' }, { name: 'segment.ms', value: String(3600_000) });
  }
  return entries;
}

export interface EnsureTopicsOptions {
  partitions: number;
  replicationFactor: number;
  /**
   * min.insync.replicas of every topic: with acks=-1 a write needs this many in-sync replicas.
   * Unset: the broker's default (which a later ensureTopics without it falls back to as well).
   */
  minInsyncReplicas?: number;
  logger: Logger;
  topics?: readonly TopicSpec[];
}

/**
 * The min.insync.replicas that goes with a replication factor: half the replicas, rounded up
 * (RF 1 → 1, RF 2 → 1, RF 3 → 2, RF 5 → 3), so an acknowledged write is on a majority and one
 * broker of three may be down without stopping writes.
 */
export function defaultMinInsyncReplicas(replicationFactor: number): number {
  return Math.max(1, Math.ceil(replicationFactor / 2));
}

/**
 * Creates missing topics and brings existing ones to their declared config. Idempotent and
 * safe to run from several processes at once. Partitions are only ever added, never removed
 * (Kafka cannot shrink a topic); a topic with more partitions than declared is left alone.
 */
export async function ensureTopics(admin: Admin, opts: EnsureTopicsOptions): Promise<void> {
  const specs = opts.topics ?? (Object.values(TOPICS) as TopicSpec[]);
  if (opts.minInsyncReplicas !== undefined && opts.minInsyncReplicas > opts.replicationFactor) {
    throw new Error(`min.insync.replicas ${opts.minInsyncReplicas} is more than the replication factor ${opts.replicationFactor}: no write could succeed`);
  }
  const existing = new Set(await admin.listTopics());
  const missing: ITopicConfig[] = specs
    .filter((s) => !existing.has(s.name))
    .map((s) => ({
      topic: s.name,
      numPartitions: s.partitions ?? opts.partitions,
      replicationFactor: opts.replicationFactor,
      configEntries: topicConfig(s, opts.minInsyncReplicas),
    }));
  if (missing.length > 0) {
    if (opts.replicationFactor > 1) {
      const { brokers } = await admin.describeCluster();
      if (brokers.length < opts.replicationFactor) {
        throw new Error(
          `replication factor ${opts.replicationFactor} asked but the cluster has ${brokers.length} broker(s) (${brokers.map((b) => b.nodeId).join(', ')}); start more brokers or lower REACH_TOPIC_REPLICATION_FACTOR`,
        );
      }
    }
    try {
      await admin.createTopics({ topics: missing, waitForLeaders: false });
    } catch (err) {
      // Another process created them between listTopics and createTopics: fine.
      if (!(err instanceof Error && /already exists/i.test(err.message + JSON.stringify((err as { errors?: unknown }).errors ?? '')))) throw err;
    }
    await waitForLeaders(
      admin,
      missing.map((t) => t.topic),
    );
    opts.logger.info({ topics: missing.map((t) => t.topic) }, 'created topics');
  }
  const present = specs.filter((s) => existing.has(s.name));
  if (present.length === 0) return;
  const meta = await admin.fetchTopicMetadata({ topics: present.map((s) => s.name) });
  const grow = meta.topics
    .map((t) => ({ topic: t.name, have: t.partitions.length, want: present.find((s) => s.name === t.name)?.partitions ?? opts.partitions }))
    .filter((t) => t.have < t.want);
  if (grow.length > 0) {
    await admin.createPartitions({ topicPartitions: grow.map((g) => ({ topic: g.topic, count: g.want })) });
    await waitForLeaders(
      admin,
      grow.map((g) => g.topic),
    );
    opts.logger.warn({ topics: grow }, 'added partitions (keys of existing records may now hash to other partitions)');
  }
  await admin.alterConfigs({
    validateOnly: false,
    resources: present.map((s) => ({ type: 2 /* ConfigResourceTypes.TOPIC */, name: s.name, configEntries: topicConfig(s, opts.minInsyncReplicas) })),
  });
}

/** One topic's replication as the cluster reports it: partition replicas and ISR, and its config. */
export interface TopicReplication {
  readonly topic: string;
  readonly partitions: ReadonlyArray<{ partition: number; leader: number; replicas: readonly number[]; isr: readonly number[] }>;
  /** The effective min.insync.replicas (topic config, else the broker's default). */
  readonly minInsyncReplicas: number;
  readonly uncleanLeaderElection: boolean;
}

/**
 * Describes the replication of `topics` (metadata for replicas/ISR, describeConfigs for the
 * settings). On a cluster a topic just created (or the consumer-offsets topic that a
 * first group lookup creates) is known to some brokers a moment before the others, and the
 * broker asked answers UNKNOWN_TOPIC_OR_PARTITION: that answer is waited out, up to `timeoutMs`
 * (a `reach up --brokers 3` failed on it once, in CI).
 */
export async function describeReplication(admin: Admin, topics: readonly string[], timeoutMs = 30_000): Promise<TopicReplication[]> {
  if (topics.length === 0) return [];
  const { meta, configs } = await whileNotThereYet(timeoutMs, async () => ({
    meta: await admin.fetchTopicMetadata({ topics: [...topics] }),
    configs: await admin.describeConfigs({
      includeSynonyms: false,
      resources: topics.map((name) => ({
        type: 2 /* ConfigResourceTypes.TOPIC */,
        name,
        configNames: ['min.insync.replicas', 'unclean.leader.election.enable'],
      })),
    }),
  }));
  return topics.map((topic) => {
    const t = meta.topics.find((m) => m.name === topic);
    const entries = configs.resources.find((r) => r.resourceName === topic)?.configEntries ?? [];
    const get = (n: string) => entries.find((e) => e.configName === n)?.configValue;
    return {
      topic,
      partitions: (t?.partitions ?? [])
        .map((p) => ({ partition: p.partitionId, leader: p.leader, replicas: [...p.replicas], isr: [...p.isr] }))
        .sort((a, b) => a.partition - b.partition),
      minInsyncReplicas: Number(get('min.insync.replicas') ?? 1),
      uncleanLeaderElection: get('unclean.leader.election.enable') === 'true',
    };
  });
}

export interface ReplicationExpectation {
  replicationFactor: number;
  minInsyncReplicas: number;
}

export interface ReplicationReport {
  topics: number;
  partitions: number;
  /** Partitions with fewer in-sync replicas than replicas (writable while ISR ≥ min.insync.replicas). */
  underReplicated: string[];
}

/**
 * Checks that every topic has exactly the asked replication: RF replicas per partition,
 * min.insync.replicas, unclean leader election off, and at least min.insync.replicas in sync.
 * Throws one error naming every contradiction (an existing topic created with another
 * replication factor is the usual one: Kafka never changes it by itself).
 */
export function checkReplication(described: readonly TopicReplication[], want: ReplicationExpectation): ReplicationReport {
  const problems: string[] = [];
  const underReplicated: string[] = [];
  let partitions = 0;
  for (const t of described) {
    if (t.partitions.length === 0) {
      problems.push(`${t.topic}: no partitions (does the topic exist?)`);
      continue;
    }
    const rfs = [...new Set(t.partitions.map((p) => p.replicas.length))];
    if (rfs.length !== 1 || rfs[0] !== want.replicationFactor) {
      const shown = t.partitions
        .filter((p) => p.replicas.length !== want.replicationFactor)
        .slice(0, 3)
        .map((p) => `partition ${p.partition} replicas [${p.replicas.join(',')}]`);
      problems.push(`${t.topic}: replication factor ${rfs.join('/')} but ${want.replicationFactor} is asked (${shown.join('; ')})`);
    }
    if (t.minInsyncReplicas !== want.minInsyncReplicas) {
      problems.push(`${t.topic}: min.insync.replicas ${t.minInsyncReplicas} but ${want.minInsyncReplicas} is asked`);
    }
    if (t.uncleanLeaderElection)
      problems.push(`${t.topic}: unclean.leader.election.enable=true (an out-of-sync replica could become leader and drop acknowledged records)`);
    for (const p of t.partitions) {
      partitions++;
      if (p.isr.length < Math.min(want.minInsyncReplicas, p.replicas.length)) {
        problems.push(
          `${t.topic}-${p.partition}: only ${p.isr.length} in-sync replica(s) [${p.isr.join(',')}] of [${p.replicas.join(',')}], fewer than min.insync.replicas`,
        );
      } else if (p.isr.length < p.replicas.length) underReplicated.push(`${t.topic}-${p.partition}`);
    }
  }
  if (problems.length > 0) {
    throw new Error(
      `the topics' replication contradicts what is asked (replication factor ${want.replicationFactor}, min.insync.replicas ${want.minInsyncReplicas}):\n  ${problems.join('\n  ')}\n` +
        'Kafka does not change the replication factor of an existing topic: reassign its partitions (kafka-reassign-partitions), or delete the topic (its records are lost) and run the deploy step again.',
    );
  }
  return { topics: described.length, partitions, underReplicated };
}

/**
 * Waits until every partition of `topics` has a leader that serves it, so the first produce
 * cannot fail. Not kafkajs's `createTopics({ waitForLeaders })` (on unless turned off): that
 * only tolerates LEADER_NOT_AVAILABLE, while a Kafka 4 broker that has not loaded a new topic
 * yet answers UNKNOWN_TOPIC_OR_PARTITION for a moment, and metadata names a leader before that
 * leader accepts writes (NOT_LEADER_OR_FOLLOWER) — a plain producer's resend then duplicates
 * the records of the request's other partitions. Both seen right after a broker start. Listing
 * offsets goes to each partition's leader, so its success is the readiness that matters.
 */
export async function waitForLeaders(admin: Admin, topics: readonly string[], timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (const topic of topics) {
    let last: unknown = null;
    for (;;) {
      try {
        const meta = await admin.fetchTopicMetadata({ topics: [topic] });
        const partitions = meta.topics[0]?.partitions ?? [];
        if (partitions.length > 0 && partitions.every((p) => p.leader >= 0)) {
          const offsets = await admin.fetchTopicOffsets(topic);
          if (offsets.length === partitions.length) break;
        }
        last = 'partitions without a serving leader';
      } catch (err) {
        // Only the broker's "not there yet" answers are worth waiting for.
        if (!notThereYet(err)) throw err;
        last = err;
      }
      if (Date.now() > deadline) throw new Error(`topic ${topic} has no serving leaders after ${timeoutMs} ms: ${String(last)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/**
 * A broker's retriable answer ("not there yet": an unknown topic, no leader yet), also when
 * kafkajs's own retries gave up on it and wrapped it (KafkaJSNumberOfRetriesExceeded, not
 * retriable itself, keeps it as `cause`).
 */
export function notThereYet(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const e = err as Error & { retriable?: boolean };
  return e.retriable === true || (e.cause !== undefined && notThereYet(e.cause));
}

/** Runs `fn` again every 250 ms while it fails with a "not there yet" answer, until `timeoutMs`. */
async function whileNotThereYet<T>(timeoutMs: number, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (!notThereYet(err) || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}
