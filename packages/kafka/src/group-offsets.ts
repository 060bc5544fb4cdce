import type { Admin } from 'kafkajs';

/** Offsets by `topic:partition`. */
export type PartitionOffsets = ReadonlyMap<string, bigint>;

/** The end offsets (high watermarks) of the topics' partitions. */
export async function endOffsets(admin: Admin, topics: readonly string[]): Promise<PartitionOffsets> {
  const out = new Map<string, bigint>();
  for (const topic of topics) {
    for (const p of await admin.fetchTopicOffsets(topic)) out.set(`${topic}:${p.partition}`, BigInt(p.high));
  }
  return out;
}

/** A consumer group's committed offsets on the topics; a partition it never committed is absent. */
export async function committedOffsets(admin: Admin, groupId: string, topics: readonly string[]): Promise<PartitionOffsets> {
  const out = new Map<string, bigint>();
  for (const t of await admin.fetchOffsets({ groupId, topics: [...topics] })) {
    for (const p of t.partitions) if (Number(p.offset) >= 0) out.set(`${t.topic}:${p.partition}`, BigInt(p.offset));
  }
  return out;
}
