import { loadConfig, silentLogger } from '@reach/core';
import { createPgPool, createRedis, pgStorage, redisStorage, type RedisStorage, type TableStorage } from '@reach/store';
import { kafkaStorage, type KafkaStorage } from '../local/kafka-storage.js';
import { table } from '../output.js';
import { paths, reachHome } from '../paths.js';
import { readState } from '../local/stack.js';

export interface StorageReport {
  postgres: TableStorage[];
  redis: RedisStorage;
  kafka: KafkaStorage | { error: string };
}

/** 1536 → "1.5 KiB". */
export function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

/**
 * `reach storage [--keys] [--json]`: what the stack keeps — every PostgreSQL table with its
 * data and index sizes and the oldest day it still holds, Redis used_memory and key count (with
 * --keys, every key family with its bytes and how many keys have no TTL), and Kafka's retained
 * records per topic and, for a local stack, its log bytes (docs/storage.md).
 */
export async function storage(args: { json: boolean; keys: boolean }): Promise<number> {
  const cfg = loadConfig(['databaseUrl', 'redisUrl', 'kafkaBrokers'], process.env);
  const home = reachHome();
  const state = readState(paths(home));
  const brokers = process.env.REACH_KAFKA_BROKERS ? cfg.kafkaBrokers : (state?.endpoints.kafka?.split(',') ?? cfg.kafkaBrokers);
  const pool = createPgPool(cfg.databaseUrl, { logger: silentLogger, max: 1 });
  const redis = createRedis(cfg.redisUrl, silentLogger);
  try {
    const [postgres, redisReport, kafka] = await Promise.all([
      pgStorage(pool),
      redisStorage(redis, { scan: args.keys }),
      kafkaStorage(brokers, state ? home : null).catch((err: unknown) => ({ error: (err as Error).message })),
    ]);
    const report: StorageReport = { postgres, redis: redisReport, kafka };
    if (args.json) {
      process.stdout.write(JSON.stringify(report, null, 2) + '\n');
      return 0;
    }
    process.stdout.write('PostgreSQL\n');
    process.stdout.write(
      table(
        postgres.map((t) => ({
          table: t.table,
          rows: t.rows,
          data: bytes(t.tableBytes),
          indexes: bytes(t.indexBytes),
          total: bytes(t.totalBytes),
          partitions: t.partitions || '',
          oldest: t.oldest?.slice(0, 19).replace('T', ' ') ?? '',
        })),
      ),
    );
    process.stdout.write(`\nRedis: used_memory ${bytes(redisReport.usedMemory)} (the whole server), ${redisReport.keys} keys in this database\n`);
    if (redisReport.patterns) {
      process.stdout.write(table(redisReport.patterns.map((p) => ({ pattern: p.pattern, keys: p.keys, bytes: bytes(p.bytes), without_ttl: p.withoutTtl }))));
    }
    if ('error' in kafka) process.stdout.write(`\nKafka: not reachable (${kafka.error})\n`);
    else {
      process.stdout.write(`\nKafka: ${kafka.logBytes === null ? 'log size unknown (not a local broker)' : `${bytes(kafka.logBytes)} of logs on disk`}\n`);
      process.stdout.write(table(Object.entries(kafka.records).map(([topic, records]) => ({ topic, records }))));
    }
    return 0;
  } finally {
    await pool.end();
    redis.disconnect();
  }
}
