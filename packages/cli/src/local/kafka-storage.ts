import { readdirSync, statSync, type Dirent } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '@reach/core';
import { createKafka, TOPICS } from '@reach/kafka';

/** What the Agent-Reach topics hold: records retained per topic, and the local brokers' log bytes. */
export interface KafkaStorage {
  /** Bytes under the local brokers' data directories (null: Kafka is not a local one). */
  logBytes: number | null;
  /** Records retained (high − low watermark, summed over partitions), by topic. */
  records: Record<string, number>;
}

/**
 * Disk bytes of every file under `dir` (0 when it does not exist): allocated blocks, not apparent
 * sizes — Kafka preallocates its index files sparse (10 MiB each, nearly all holes).
 */
export function dirBytes(dir: string): number {
  let total = 0;
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const p = join(dir, e.name);
    try {
      if (e.isDirectory()) total += dirBytes(p);
      else if (e.isFile()) total += statSync(p).blocks * 512;
    } catch {
      // a segment deleted by retention while we looked
    }
  }
  return total;
}

/**
 * Retained records per topic (watermarks, one ListOffsets per topic) and, for a local stack,
 * the size of the brokers' data directories: `<home>/data/kafka` or `<home>/data/kafka-cluster-*`.
 */
export async function kafkaStorage(brokers: readonly string[], home: string | null): Promise<KafkaStorage> {
  const admin = createKafka({ brokers, clientId: 'reach-storage', logger: silentLogger, connectionTimeoutMs: 2000 }).admin();
  await admin.connect();
  const records: Record<string, number> = {};
  try {
    const present = new Set(await admin.listTopics());
    for (const t of Object.values(TOPICS)) {
      if (!present.has(t.name)) continue;
      const offsets = await admin.fetchTopicOffsets(t.name);
      records[t.name] = offsets.reduce((n, o) => n + Number(o.high) - Number(o.low), 0);
    }
  } finally {
    await admin.disconnect();
  }
  let logBytes: number | null = null;
  if (home) {
    const data = join(home, 'data');
    let dirs: string[] = [];
    try {
      dirs = readdirSync(data).filter((d) => d === 'kafka' || d.startsWith('kafka-cluster-'));
    } catch {
      // no local data: an outside Kafka
    }
    if (dirs.length > 0) logBytes = dirs.reduce((n, d) => n + dirBytes(join(data, d)), 0);
  }
  return { logBytes, records };
}
