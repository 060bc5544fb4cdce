import type { Logger } from '@reach/core';
import type { Admin, Kafka } from '@reach/kafka';
import { STAGES, stageRow, type PartitionSample, type StageRow, type StageSample } from './lag.js';

export interface PipelineSnapshot {
  /** When the offsets were read (RFC 3339); null before the first sample. */
  at: string | null;
  stages: StageRow[];
  /** Why the last sample failed (the previous rows are kept, marked stale by `at`). */
  error?: string;
}

/**
 * Reads every stage's end offsets and its group's committed offsets with one admin client,
 * every interval (the page polls the result, so N open pages cost one sampler). Keeps the
 * previous sample for rates.
 */
export class PipelineSampler {
  private admin: Admin | undefined;
  private previous = new Map<string, StageSample>();
  private current: PipelineSnapshot = { at: null, stages: [] };

  constructor(
    private readonly kafka: Kafka,
    private readonly log: Logger,
    /** Reports each stage's lag (the console's own metric). */
    private readonly onLag: (stage: string, lag: number) => void,
  ) {}

  snapshot(): PipelineSnapshot {
    return this.current;
  }

  async sample(): Promise<void> {
    try {
      if (!this.admin) {
        const admin = this.kafka.admin();
        await admin.connect();
        this.admin = admin;
      }
      const admin = this.admin;
      const at = Date.now();
      const described = await admin.describeGroups(STAGES.map((s) => s.group));
      const groups = new Map(described.groups.map((g) => [g.groupId, g]));
      const rows = await Promise.all(
        STAGES.map(async (spec) => {
          const [ends, committed] = await Promise.all([admin.fetchTopicOffsets(spec.topic), admin.fetchOffsets({ groupId: spec.group, topics: [spec.topic] })]);
          const byPartition = new Map((committed[0]?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
          const partitions: PartitionSample[] = ends
            .map((p) => ({ partition: p.partition, low: Number(p.low), high: Number(p.high), committed: byPartition.get(p.partition) ?? -1 }))
            .sort((a, b) => a.partition - b.partition);
          const group = groups.get(spec.group);
          const sample: StageSample = { at, partitions, groupState: group?.state ?? 'Unknown', members: group?.members.length ?? 0 };
          const row = stageRow(spec, sample, this.previous.get(spec.stage));
          this.previous.set(spec.stage, sample);
          this.onLag(spec.stage, row.lag);
          return row;
        }),
      );
      this.current = { at: new Date(at).toISOString(), stages: rows };
    } catch (err) {
      this.current = { ...this.current, error: (err as Error).message };
      this.log.warn({ err }, 'reading consumer offsets failed; showing the last sample');
      // A broken admin connection is rebuilt on the next tick.
      const admin = this.admin;
      this.admin = undefined;
      await admin?.disconnect().catch(() => undefined);
    }
  }

  async stop(): Promise<void> {
    await this.admin?.disconnect();
    this.admin = undefined;
  }
}
