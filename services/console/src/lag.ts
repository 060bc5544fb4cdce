import { TOPICS } from '@reach/kafka';

/**
 * Queue depth per pipeline stage: for each stage topic, how far its consumer group's committed
 * offsets are behind the topic's end offsets. Pure arithmetic over two samples (the previous
 * one gives produce and consume rates), so the Kafka calls stay in pipeline.ts.
 */
export interface StageSpec {
  /** The stage as operators name it (the topic without `reach.` and `.v1`). */
  readonly stage: string;
  readonly topic: string;
  /** The consume loop's group: `reach-<service>` (service-kit's stage()/batchStage() default). */
  readonly group: string;
  readonly consumer: string;
}

const stage = (key: keyof typeof TOPICS, consumer: string): StageSpec => ({
  stage: key,
  topic: TOPICS[key].name,
  group: `reach-${consumer}`,
  consumer,
});

/** Every stage topic in pipeline order, with the service whose consume loop drains it. */
export const STAGES: readonly StageSpec[] = [
  stage('ingress', 'ingress'),
  stage('pending', 'router'),
  stage('routed', 'dispatcher'),
  stage('retry', 'retry-scheduler'),
  stage('dlq', 'dead-letter'),
  // Status events travel packed (reach.status-batches.v1); reach.status.v1 only carries single
  // events from outside producers and tools, so the stage shows the batches topic.
  { ...stage('statusBatches', 'tracker'), stage: 'status' },
];

export interface PartitionSample {
  partition: number;
  /** Log start offset (first retained record). */
  low: number;
  /** End offset (high watermark): the offset the next record will get. */
  high: number;
  /** The group's committed offset; -1 when it has never committed on this partition. */
  committed: number;
}

export interface StageSample {
  /** epoch ms */
  at: number;
  partitions: readonly PartitionSample[];
  /** Consumer group state as the broker reports it (Stable, Empty, PreparingRebalance, Dead, ...). */
  groupState: string;
  members: number;
}

export interface StageRow {
  stage: string;
  topic: string;
  group: string;
  consumer: string;
  partitions: number;
  /** Sum of end offsets: records ever written to the topic. */
  end_offset: number;
  /** Sum of the positions the group has committed (a partition never committed counts from its log start). */
  committed_offset: number;
  /** Records written but not yet consumed, summed over partitions. */
  lag: number;
  max_partition_lag: number;
  group_state: string;
  members: number;
  /** Records per second written to / consumed from the topic since the previous sample; null on the first. */
  produced_per_s: number | null;
  consumed_per_s: number | null;
}

/** Where the group stands on a partition: its committed offset, or the log start when it never committed. */
export function position(p: PartitionSample): number {
  return p.committed < 0 ? p.low : Math.min(Math.max(p.committed, p.low), p.high);
}

/** Records not yet consumed on one partition (never negative). */
export function partitionLag(p: PartitionSample): number {
  return Math.max(0, p.high - position(p));
}

function rate(now: number, before: number, seconds: number): number | null {
  // An offset going backwards means the topic was recreated or offsets were reset: no rate.
  if (seconds <= 0 || now < before) return null;
  return (now - before) / seconds;
}

const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);

export function stageRow(spec: StageSpec, cur: StageSample, prev?: StageSample): StageRow {
  const lags = cur.partitions.map(partitionLag);
  const end = sum(cur.partitions.map((p) => p.high));
  const committed = sum(cur.partitions.map(position));
  let produced: number | null = null;
  let consumed: number | null = null;
  if (prev && prev.partitions.length === cur.partitions.length) {
    const seconds = (cur.at - prev.at) / 1000;
    produced = rate(end, sum(prev.partitions.map((p) => p.high)), seconds);
    consumed = rate(committed, sum(prev.partitions.map(position)), seconds);
  }
  return {
    stage: spec.stage,
    topic: spec.topic,
    group: spec.group,
    consumer: spec.consumer,
    partitions: cur.partitions.length,
    end_offset: end,
    committed_offset: committed,
    lag: sum(lags),
    max_partition_lag: lags.length ? Math.max(...lags) : 0,
    group_state: cur.groupState,
    members: cur.members,
    produced_per_s: produced,
    consumed_per_s: consumed,
  };
}
