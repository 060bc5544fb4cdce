import {
  TOPICS,
  checkReplication,
  createKafka,
  defaultMinInsyncReplicas,
  describeReplication,
  ensureTopics,
  topicSchemaBindings,
  type Admin,
  type KafkaSecurity,
} from '@reach/kafka';
import { registerSchemas } from '@reach/envelope';
import { createPgPool, ensureDatabase, migrate } from '@reach/store';
import type { Logger } from '@reach/core';

export interface SetupConfig {
  kafkaBrokers: readonly string[];
  schemaRegistryUrl: string;
  databaseUrl: string;
  topicPartitions: number;
  topicReplicationFactor: number;
  /** Default: half the replication factor, rounded up (RF 3 → 2). */
  minInsyncReplicas?: number;
  /**
   * Topics Agent-Reach does not create but relies on (consumer offsets, the development
   * registry's _schemas), checked against the replication the broker config gives them.
   */
  internalTopics?: { names: readonly string[]; replicationFactor: number; minInsyncReplicas: number };
  /** SASL/TLS to an outside Kafka (REACH_KAFKA_*); unset: plaintext, as the local broker speaks. */
  kafkaSecurity?: KafkaSecurity;
  /** Extra CAs (REACH_CA_FILE) for an https schema registry. */
  registryCa?: string;
}

/**
 * The deploy step, run once by `reach up` (and `reach setup` in a deployment pipeline) before
 * any service starts: the database and its migrations, every topic as code, and every schema of
 * schemas/ registered after a compatibility check. Services only look things up.
 */
export async function setupStack(cfg: SetupConfig, log: Logger, progress: (msg: string) => void): Promise<void> {
  const created = await ensureDatabase(cfg.databaseUrl, log);
  const pool = createPgPool(cfg.databaseUrl, { logger: log });
  try {
    const applied = await migrate(pool, log);
    const db = decodeURIComponent(new URL(cfg.databaseUrl).pathname.slice(1));
    progress(
      `${created ? `database ${db} created, ` : ''}${applied.length ? `database migrated (${applied.join(', ')})` : `database ${db}: schema up to date`}`,
    );
  } finally {
    await pool.end();
  }
  const kafka = createKafka({ brokers: cfg.kafkaBrokers, clientId: 'reach-setup', logger: log, security: cfg.kafkaSecurity });
  const admin = kafka.admin();
  await admin.connect();
  try {
    const minInsyncReplicas = cfg.minInsyncReplicas ?? defaultMinInsyncReplicas(cfg.topicReplicationFactor);
    // Existing topics with another replication factor fail the step before anything is altered.
    const present = new Set(await admin.listTopics());
    const existing = Object.values(TOPICS)
      .map((t) => t.name)
      .filter((n) => present.has(n));
    const before = await describeReplication(admin, existing);
    checkReplication(
      before.map((t) => ({ ...t, minInsyncReplicas, uncleanLeaderElection: false })),
      { replicationFactor: cfg.topicReplicationFactor, minInsyncReplicas },
    );
    await ensureTopics(admin, { partitions: cfg.topicPartitions, replicationFactor: cfg.topicReplicationFactor, minInsyncReplicas, logger: log });
    progress(await checkTopicReplication(admin, { ...cfg, minInsyncReplicas }));
  } finally {
    await admin.disconnect();
  }
  const registered = await registerSchemas(cfg.schemaRegistryUrl, topicSchemaBindings(), log, cfg.registryCa ? { ca: cfg.registryCa } : {});
  progress(`schemas registered (${registered.map((r) => `${r.subject}#${r.id}`).join(', ')})`);
}

/**
 * Describes every Agent-Reach topic (configs, partition replicas and ISR) and the internal
 * ones, fails when one contradicts the asked replication, and returns the report line.
 */
async function checkTopicReplication(admin: Admin, cfg: SetupConfig & { minInsyncReplicas: number }): Promise<string> {
  const names = Object.values(TOPICS).map((t) => t.name);
  const want = { replicationFactor: cfg.topicReplicationFactor, minInsyncReplicas: cfg.minInsyncReplicas };
  const own = checkReplication(await describeReplication(admin, names), want);
  let line =
    `topics: RF ${want.replicationFactor}, min.insync.replicas ${want.minInsyncReplicas}, unclean leader election off ` +
    `(${own.topics} topics, ${own.partitions} partitions, ${own.underReplicated.length === 0 ? 'every replica in sync' : `under-replicated: ${own.underReplicated.join(', ')}`})`;
  if (cfg.internalTopics) {
    const internal = cfg.internalTopics;
    // The consumer-offsets topic exists once some group was looked up: look one up.
    if (internal.names.includes('__consumer_offsets')) await admin.fetchOffsets({ groupId: 'reach-setup-probe', topics: [] }).catch(() => undefined);
    const present = new Set(await admin.listTopics());
    const names = internal.names.filter((n) => present.has(n));
    const report = checkReplication(await describeReplication(admin, names), internal);
    if (names.length > 0) {
      line += `; internal ${names.join(', ')}: RF ${internal.replicationFactor}, min.insync.replicas ${internal.minInsyncReplicas}${report.underReplicated.length ? ` (under-replicated: ${report.underReplicated.join(', ')})` : ''}`;
    }
  }
  return line;
}
