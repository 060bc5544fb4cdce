import { ensureTopics, createKafka, topicSchemaBindings } from '@reach/kafka';
import { registerSchemas } from '@reach/envelope';
import { createPgPool, ensureDatabase, ensurePartitions, migrate } from '@reach/store';
import type { Logger } from '@reach/core';

export interface SetupConfig {
  kafkaBrokers: readonly string[];
  schemaRegistryUrl: string;
  databaseUrl: string;
  topicPartitions: number;
  topicReplicationFactor: number;
}

/**
 * The deploy step, run once by `reach up` (and `reach setup` in a deployment pipeline) before
 * any service starts: the database and its migrations, every topic as code, and every schema of
 * schemas/ registered after a compatibility check. Services only look things up.
 */
export async function setupStack(cfg: SetupConfig, log: Logger, progress: (msg: string) => void): Promise<void> {
  await ensureDatabase(cfg.databaseUrl, log);
  const pool = createPgPool(cfg.databaseUrl, { logger: log });
  try {
    const applied = await migrate(pool, log);
    await ensurePartitions(pool);
    progress(applied.length ? `database migrated (${applied.join(', ')})` : 'database schema up to date');
  } finally {
    await pool.end();
  }
  const kafka = createKafka({ brokers: cfg.kafkaBrokers, clientId: 'reach-setup', logger: log });
  const admin = kafka.admin();
  await admin.connect();
  try {
    await ensureTopics(admin, { partitions: cfg.topicPartitions, replicationFactor: cfg.topicReplicationFactor, logger: log });
    progress('topics ensured');
  } finally {
    await admin.disconnect();
  }
  const registered = await registerSchemas(cfg.schemaRegistryUrl, topicSchemaBindings(), log);
  progress(`schemas registered (${registered.map((r) => `${r.subject}#${r.id}`).join(', ')})`);
}
