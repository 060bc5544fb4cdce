import type { Admin, ITopicConfig } from 'kafkajs';
import type { Logger } from '@reach/core';

/**
 * Every topic of DESIGN §1, as code: created idempotently at start (and by `reach up`) with its
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
    description: 'envelopes produced by agents (public contract, DESIGN §2)',
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
    description: 'every state change of every message, folded by the tracker',
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

function topicConfig(spec: TopicSpec): Array<{ name: string; value: string }> {
  const entries = [
    { name: 'cleanup.policy', value: spec.compacted ? 'compact' : 'delete' },
    { name: 'retention.ms', value: String(spec.retentionMs) },
  ];
  if (spec.compacted) {
    entries.push({ name: 'min.cleanable.dirty.ratio', value: '0.1' }, { name: 'segment.ms', value: String(3600_000) });
  }
  return entries;
}

export interface EnsureTopicsOptions {
  partitions: number;
  replicationFactor: number;
  logger: Logger;
  topics?: readonly TopicSpec[];
}

/**
 * Creates missing topics and brings existing ones to their declared config. Idempotent and
 * safe to run from several processes at once. Partitions are only ever added, never removed
 * (Kafka cannot shrink a topic); a topic with more partitions than declared is left alone.
 */
export async function ensureTopics(admin: Admin, opts: EnsureTopicsOptions): Promise<void> {
  const specs = opts.topics ?? (Object.values(TOPICS) as TopicSpec[]);
  const existing = new Set(await admin.listTopics());
  const missing: ITopicConfig[] = specs
    .filter((s) => !existing.has(s.name))
    .map((s) => ({ topic: s.name, numPartitions: s.partitions ?? opts.partitions, replicationFactor: opts.replicationFactor, configEntries: topicConfig(s) }));
  if (missing.length > 0) {
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
    resources: present.map((s) => ({ type: 2 /* ConfigResourceTypes.TOPIC */, name: s.name, configEntries: topicConfig(s) })),
  });
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
        if (!(err instanceof Error && (err as { retriable?: boolean }).retriable === true)) throw err;
        last = err;
      }
      if (Date.now() > deadline) throw new Error(`topic ${topic} has no serving leaders after ${timeoutMs} ms: ${String(last)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
