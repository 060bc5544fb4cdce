import type { EachBatchPayload, Kafka, Producer } from 'kafkajs';
import { toReachError, type Logger } from '@reach/core';
import { produceAll, toInRecord, type InRecord, type OutRecord } from './records.js';
import { GroupCommit } from './group-commit.js';
import { createStageConsumer, DEFAULT_PARTITION_CONCURRENCY, IDLE_FETCH_WAIT_MS, keepBeating, OffsetCommitter, type FetchWait } from './group-consumer.js';

/**
 * A consume loop for stages whose real output is a bulk write (the tracker folding status
 * events into PostgreSQL): the handler gets up to `maxBatch` records of one partition at once
 * and must make them durable before it returns. Only then are any outputs it returns (DLQ
 * entries for records it could not use) produced with acks=-1 and the offsets resolved, so a
 * crash replays records instead of losing them (at-least-once; the writes must be idempotent).
 *
 * A handler failure stops the batch without resolving it; kafkajs retries it with backoff
 * (dependency down). The handler itself turns poison records into outputs: nothing here can
 * tell a bad record from a bad dependency.
 */
export interface RunBatchStageOptions {
  kafka: Kafka;
  producer: Producer;
  groupId: string;
  topics: readonly string[];
  logger: Logger;
  /** Most records handed to one handler call (default 1000). */
  maxBatch?: number;
  /** Read from the earliest offset when the group has no committed offset (default true). */
  fromBeginning?: boolean;
  /** Partitions processed in parallel (default DEFAULT_PARTITION_CONCURRENCY; order within a partition is kept). */
  partitionsConsumedConcurrently?: number;
  handleBatch: (records: readonly InRecord[]) => Promise<readonly OutRecord[]>;
  /**
   * How long the broker may gather records before answering a fetch, or this side lingers
   * before the next (default: answer at the first record, ask again at once). A bulk writer
   * trades that much latency for fewer, larger writes.
   */
  fetchWait?: FetchWait;
  /**
   * Hand the partition batches consumed at once to one handler call (GroupCommit): one call
   * and one round of the handler's writes for a whole fetch instead of one per partition (the
   * produces are coalesced per producer either way: produceAll). The handler then gets records of several partitions (in order within each);
   * should it fail, every batch of the call is retried.
   */
  together?: boolean;
  /** Called when kafkajs gives up on the consumer: the process should exit for a supervised restart. */
  onFatal: (error: Error) => void;
}

export interface RunningBatchStage {
  stop(): Promise<void>;
}

export async function runBatchStage(opts: RunBatchStageOptions): Promise<RunningBatchStage> {
  const log = opts.logger.child({ component: 'batch-stage', group: opts.groupId });
  const maxBatch = opts.maxBatch ?? 1000;
  const consumer = createStageConsumer(opts.kafka, opts.groupId, log, opts.onFatal, opts.fetchWait ?? { maxWaitMs: IDLE_FETCH_WAIT_MS });
  const lingerMs = opts.fetchWait?.lingerMs ?? 0;
  // A stop ends the lingers at once: it waits for the batches in hand.
  const lingering = new Set<() => void>();
  let stopping = false;
  const committer = new OffsetCommitter(consumer, log, undefined, opts.onFatal);
  const handleAndProduce = async (records: readonly InRecord[]): Promise<void> => {
    await produceAll(opts.producer, await opts.handleBatch(records));
  };
  const together = opts.together ? new GroupCommit<InRecord>(handleAndProduce) : undefined;

  const eachBatch = async ({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> => {
    const msgs = batch.messages;
    for (let start = 0; start < msgs.length; start += maxBatch) {
      if (!isRunning() || isStale()) return;
      const records: InRecord[] = msgs.slice(start, start + maxBatch).map((m) => toInRecord(batch.topic, batch.partition, m));
      let out: readonly OutRecord[] = [];
      try {
        if (together) await keepBeating(heartbeat, together.add(records));
        else out = await keepBeating(heartbeat, opts.handleBatch(records));
      } catch (err) {
        const error = toReachError(err);
        log.warn({ err: error, code: error.code, partition: batch.partition, offset: records[0]!.offset }, 'batch failed; kafkajs retries it');
        throw error;
      }
      await keepBeating(heartbeat, produceAll(opts.producer, out));
      const last = records[records.length - 1]!;
      resolveOffset(last.offset);
      await committer.done(last.topic, last.partition, last.offset);
      await heartbeat();
    }
    // Only at the head of the log: with records still waiting (a backlog) the next fetch goes at once.
    if (lingerMs > 0 && batch.offsetLag() === '0' && !stopping && isRunning() && !isStale()) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, lingerMs);
        function done(): void {
          clearTimeout(timer);
          lingering.delete(done);
          resolve();
        }
        lingering.add(done);
      });
    }
  };

  await consumer.connect();
  await consumer.subscribe({ topics: [...opts.topics], fromBeginning: opts.fromBeginning ?? true });
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    partitionsConsumedConcurrently: opts.partitionsConsumedConcurrently ?? DEFAULT_PARTITION_CONCURRENCY,
    eachBatch,
  });
  log.info({ topics: opts.topics }, 'batch stage consuming');
  return {
    stop: () => {
      stopping = true;
      for (const wake of [...lingering]) wake();
      return committer.stopConsumer();
    },
  };
}
