import type { EachBatchPayload, Kafka, Producer } from 'kafkajs';
import { toReachError, type Logger, type ReachError } from '@reach/core';
import { produceAll, toInRecord, type InRecord, type OutRecord } from './records.js';
import { createStageConsumer, DEFAULT_PARTITION_CONCURRENCY, OffsetCommitter } from './group-consumer.js';

/**
 * A delay queue on a Kafka topic: each record carries the time it is due ("not before"), and
 * is handled only once that time has come. The delay lives on Kafka, not in a process: a
 * restart resumes from the committed offset and finds the same records still waiting.
 *
 * Mechanics (never a sleep inside the handler, which would stall heartbeats and rebalance):
 * records are read in partition order; when the next record is not yet due, the outputs of the
 * records before it are produced (acks=-1) and their offsets resolved, then THAT partition is
 * paused, the consumer seeks back to the waiting record (everything before it is done and
 * committed), and a timer resumes the partition at the due time. Other partitions keep
 * flowing. The cost is head-of-line waiting within one partition: a record due later delays
 * the ones behind it by at most its own remaining delay.
 */
export interface DelayStageOptions<T> {
  kafka: Kafka;
  producer: Producer;
  groupId: string;
  topic: string;
  logger: Logger;
  /** Decodes a record; a non-retryable error makes it a poison record (→ onPoison). */
  decode: (record: InRecord) => Promise<T>;
  /** Epoch ms at which the record is due. */
  dueAt: (value: T, record: InRecord) => number;
  /** Turns a due record into its outputs (produced before its offset is committed). */
  handle: (value: T, record: InRecord) => Promise<readonly OutRecord[]> | readonly OutRecord[];
  onPoison: (record: InRecord, error: ReachError) => readonly OutRecord[] | Promise<readonly OutRecord[]>;
  /** kafkajs gave up on the consumer: the process should exit for a supervised restart. */
  onFatal: (error: Error) => void;
  onRecord?: (outcome: 'ok' | 'poison' | 'retry', record: InRecord, ms: number) => void;
  /** A partition paused until `until` (epoch ms), for metrics and logs. */
  onPause?: (partition: number, offset: string, until: number) => void;
  /** Max outputs produced at once within one batch (default 500). */
  chunkSize?: number;
  partitionsConsumedConcurrently?: number;
  /** Clock, injectable for tests. */
  now?: () => number;
}

export interface RunningDelayStage {
  /** Partitions currently paused, with the time each resumes. */
  paused(): ReadonlyMap<number, number>;
  stop(): Promise<void>;
}

/**
 * Longest single pause. A record due later is simply re-read and parked again, so a far-future
 * (or corrupt) due time never overflows a timer (Node fires an over-2^31 ms timer at once).
 */
const MAX_PAUSE_MS = 60_000;

/** The delay stage's fetch wait (see runDelayStage). */
export const DELAY_FETCH_WAIT_MS = 50;

type Step<T> = { kind: 'poison'; out: readonly OutRecord[] } | { kind: 'value'; value: T } | { kind: 'retry'; error: ReachError };

export async function runDelayStage<T>(opts: DelayStageOptions<T>): Promise<RunningDelayStage> {
  const log = opts.logger.child({ component: 'delay-stage', group: opts.groupId, topic: opts.topic });
  const now = opts.now ?? Date.now;
  const chunkSize = opts.chunkSize ?? 500;
  const timers = new Map<number, { timer: NodeJS.Timeout; until: number }>();
  let stopped = false;

  // A resumed partition is only fetched once the fetch in flight returns, so this wait bounds
  // how late a due record goes out (SPEC R-D3 timing): 10 ms kept lateness tiny but made an idle
  // retry-scheduler fetch 100 times a second (the idle stack's biggest Node consumer); 50 ms
  // adds at most 50 ms (25 on average) to a backoff of ≥ 160 ms, at a fifth of the idle cost.
  const consumer = createStageConsumer(opts.kafka, opts.groupId, log, opts.onFatal, { maxWaitMs: DELAY_FETCH_WAIT_MS });
  const committer = new OffsetCommitter(consumer, log);

  const resumeAt = (partition: number, until: number): void => {
    const existing = timers.get(partition);
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(
      () => {
        timers.delete(partition);
        if (!stopped) consumer.resume([{ topic: opts.topic, partitions: [partition] }]);
      },
      Math.min(MAX_PAUSE_MS, Math.max(0, until - now())),
    );
    timers.set(partition, { timer, until });
  };

  const step = async (record: InRecord, run: () => Promise<T>): Promise<Step<T>> => {
    try {
      return { kind: 'value', value: await run() };
    } catch (err) {
      const error = toReachError(err);
      if (error.retryable && error.codeName !== 'INTERNAL') return { kind: 'retry', error };
      log.warn({ err: error, code: error.code, partition: record.partition, offset: record.offset }, 'poison record sent to the DLQ');
      opts.onRecord?.('poison', record, 0);
      return { kind: 'poison', out: await opts.onPoison(record, error) };
    }
  };

  const eachBatch = async ({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> => {
    const partition = batch.partition;
    // A batch fetched before this partition was paused (or sought) is not ours to handle.
    if (timers.has(partition) || !isRunning() || isStale()) return;
    let out: OutRecord[] = [];
    let lastDone: string | undefined;
    const flush = async (): Promise<void> => {
      await produceAll(opts.producer, out);
      out = [];
      if (lastDone !== undefined) {
        resolveOffset(lastDone);
        await committer.done(batch.topic, partition, lastDone);
      }
      await heartbeat();
    };
    for (const m of batch.messages) {
      if (!isRunning() || isStale()) break;
      const record: InRecord = toInRecord(batch.topic, partition, m);
      const started = performance.now();
      const decoded = await step(record, () => opts.decode(record));
      if (decoded.kind === 'retry') {
        await flush();
        opts.onRecord?.('retry', record, performance.now() - started);
        log.warn({ err: decoded.error, code: decoded.error.code }, 'dependency failure; the batch is retried from the failed record');
        throw decoded.error;
      }
      if (decoded.kind === 'poison') {
        out.push(...decoded.out);
        lastDone = m.offset;
        continue;
      }
      const due = opts.dueAt(decoded.value, record);
      if (due > now()) {
        // Everything before this record is done: produce it, then park the partition here.
        await flush();
        consumer.pause([{ topic: opts.topic, partitions: [partition] }]);
        consumer.seek({ topic: opts.topic, partition, offset: m.offset });
        resumeAt(partition, due);
        opts.onPause?.(partition, m.offset, due);
        log.debug({ partition, offset: m.offset, resumeInMs: due - now() }, 'partition paused until its next record is due');
        return;
      }
      const handled = await step(record, async () => {
        out.push(...(await opts.handle(decoded.value, record)));
        return decoded.value;
      });
      if (handled.kind === 'retry') {
        await flush();
        opts.onRecord?.('retry', record, performance.now() - started);
        log.warn({ err: handled.error, code: handled.error.code }, 'dependency failure; the batch is retried from the failed record');
        throw handled.error;
      }
      if (handled.kind === 'poison') out.push(...handled.out);
      else opts.onRecord?.('ok', record, performance.now() - started);
      lastDone = m.offset;
      if (out.length >= chunkSize) await flush();
    }
    await flush();
  };

  await consumer.connect();
  await consumer.subscribe({ topics: [opts.topic], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    partitionsConsumedConcurrently: opts.partitionsConsumedConcurrently ?? DEFAULT_PARTITION_CONCURRENCY,
    eachBatch,
  });
  log.info('delay stage consuming');
  return {
    paused: () => new Map([...timers].map(([p, t]) => [p, t.until])),
    stop: async () => {
      stopped = true;
      for (const { timer } of timers.values()) clearTimeout(timer);
      timers.clear();
      await committer.stopConsumer();
    },
  };
}
