import type { Admin } from '@reach/kafka';
import type { LagReading } from './results.js';

/**
 * Consumer lag of the pipeline: for every consumer group of the stack that commits offsets
 * (the stages: reach-ingress, reach-router, reach-dispatcher, reach-tracker, ...; found with
 * listGroups, not hard-coded, so a new stage is counted), end offset − committed offset summed
 * over its partitions. Groups that never commit (the table views) have nothing to lag.
 */

/** Stack groups are `reach-<service>…`; the bench's own are `reach.bench.…`. */
const STACK_GROUP = /^reach-/;

export interface PartitionOffsets {
  partition: number;
  low: number;
  high: number;
  /** -1 when the group never committed on the partition. */
  committed: number;
}

/** Records the group has not consumed on a partition; an uncommitted partition counts from its log start. */
export function partitionLag(p: PartitionOffsets): number {
  const position = p.committed < 0 ? p.low : Math.min(Math.max(p.committed, p.low), p.high);
  return Math.max(0, p.high - position);
}

export class ConsumerLag {
  private groups: string[] = [];

  constructor(private readonly admin: Admin) {}

  /** The groups found by the last discover(). */
  get committingGroups(): readonly string[] {
    return this.groups;
  }

  /** (Re)discovers the stack's committing groups: a restarted stack may have new ones. */
  async discover(): Promise<string[]> {
    const { groups } = await this.admin.listGroups();
    const found: string[] = [];
    for (const g of groups.filter((x) => STACK_GROUP.test(x.groupId))) {
      const topics = await this.admin.fetchOffsets({ groupId: g.groupId });
      if (topics.some((t) => t.partitions.some((p) => Number(p.offset) >= 0))) found.push(g.groupId);
    }
    this.groups = found.sort();
    return this.groups;
  }

  async read(): Promise<LagReading> {
    const ends = new Map<string, Map<number, { low: number; high: number }>>();
    const endsOf = async (topic: string) => {
      let m = ends.get(topic);
      if (!m) {
        const offsets = await this.admin.fetchTopicOffsets(topic);
        m = new Map(offsets.map((o) => [o.partition, { low: Number(o.low), high: Number(o.high) }]));
        ends.set(topic, m);
      }
      return m;
    };
    const byGroup: Record<string, number> = {};
    let total = 0;
    for (const groupId of this.groups) {
      let lag = 0;
      for (const t of await this.admin.fetchOffsets({ groupId })) {
        const topicEnds = await endsOf(t.topic);
        for (const p of t.partitions) {
          const e = topicEnds.get(p.partition);
          if (e) lag += partitionLag({ partition: p.partition, ...e, committed: Number(p.offset) });
        }
      }
      byGroup[groupId] = lag;
      total += lag;
    }
    return { total, byGroup };
  }

  /**
   * Waits (bounded) until the stages stopped draining: lag at zero, or no lower than it was
   * three readings (seconds) ago — a single pair of readings can straddle a commit timer and
   * look flat while a backlog is still being worked off. After a step the pipeline could not
   * keep up with, nothing else may start on top of its backlog. Returns the last reading.
   */
  async settle(maxMs: number): Promise<{ lag: LagReading; settled: boolean; waitedS: number }> {
    const started = Date.now();
    const totals: number[] = [];
    let cur = await this.read();
    totals.push(cur.total);
    while (cur.total > 0 && Date.now() - started < maxMs) {
      if (totals.length > 3 && cur.total >= totals[totals.length - 4]!) return { lag: cur, settled: true, waitedS: (Date.now() - started) / 1000 };
      await new Promise((r) => setTimeout(r, 1000));
      cur = await this.read();
      totals.push(cur.total);
    }
    return { lag: cur, settled: cur.total === 0 || Date.now() - started < maxMs, waitedS: (Date.now() - started) / 1000 };
  }
}
