import { dropPartitionsBefore, ensurePartitions, PARTITIONED_TABLES, purgeInBatches, retentionCutoff, type Pool } from '@reach/store';
import type { RetentionOutcome } from '@reach/service-kit';

/**
 * The read model's upkeep (issue 26), owned by the tracker as the tables' only writer: the
 * partitions for now and the next ones are made, the partitions whose rows are all older than
 * REACH_RETENTION_MESSAGES are dropped whole, and the few rows the DEFAULT partitions caught
 * (a skewed clock, a gap after REACH_PARTITION_INTERVAL changed) are deleted in batches.
 */
export async function readModelUpkeep(pg: Pool, o: { intervalS: number; retentionS: number; now?: number }): Promise<RetentionOutcome[]> {
  const now = o.now ?? Date.now();
  await ensurePartitions(pg, { intervalS: o.intervalS, now: new Date(now) });
  const cutoff = retentionCutoff(o.retentionS, now);
  const { dropped } = await dropPartitionsBefore(pg, cutoff);
  const out: RetentionOutcome[] = [];
  for (const table of PARTITIONED_TABLES) {
    const rows = await purgeInBatches(pg, { table: `${table}_default`, where: 'created_at < $1', cutoff });
    out.push({ table, rows, partitions: dropped.filter((p) => p.startsWith(`${table}_`)) });
  }
  return out;
}
