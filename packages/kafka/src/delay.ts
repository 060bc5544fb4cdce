import type { EachBatchPayload, Kafka, KafkaMessage, Producer } from 'kafkajs';
import { toReachError, type Logger, type ReachError } from '@reach/core';
import { produceAll, toInRecord, type InRecord, type OutRecord } from './records.js';
import { createStageConsumer, DEFAULT_PARTITION_CONCURRENCY, IDLE_FETCH_WAIT_MS, OffsetCommitter } from './group-consumer.js';

/**
 * A delay queue on a Kafka topic: each record carries the time it is due ("not before"), and
 * is handled only once that time has come. The delay lives on Kafka, not in a process: a
 * restart resumes from the committed offset and finds the same records still waiting.
 *
 * Mechanics (never a sleep inside the handler, which would stall heartbeats and rebalance):
 * records are read in partition order; when the next record is not yet due, the outputs of the
 * records before it are produced (acks=-1) and their offsets committed, and the records from
 * the waiting one on are queued in memory for THAT partition, with a timer at its due time. The
 * partition keeps being fetched: what arrives joins the end of its queue. The timer hands the
 * queue over in order as each record comes due (produce, then commit), so a due record goes out
 * on its timer, not on the next fetch. Other partitions keep flowing. Queued records are only a
 * copy: their offsets are committed once handled, so a crash or a rebalance (which drops the
 * queues) reads them again from Kafka. A queue over MAX_QUEUED records pauses its partition
 * until it shrinks. The cost is head-of-line waiting within one partition: a record due later
 * delays the ones behind it by at most its own remaining delay.
 *
 * Because nothing waits for a fetch to come due, the consumer long-polls (IDLE_FETCH_WAIT_MS):
 * the earlier design paused the partition and fetched the record again once due, and a resumed
 * partition is only fetched when the fetch in flight returns, which needed a 10 ms fetch wait
 * (100 fetches a second while idle) to go out on time.
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

type Step<T> = { kind: 'poison'; out: readonly OutRecord[] } | { kind: 'value'; value: T } | { kind: 'retry'; error: ReachError };

/** A partition's records from the first waiting one on, in order, with that one's timer. */
interface Queue<T> {
  messages: KafkaMessage[];
  /** The first one's decoded value and due time. */
  first: { value: T; due: number };
  timer: NodeJS.Timeout;
  /** Paused because the queue grew past MAX_QUEUED. */
  paused: boolean;
}

/** Records queued per partition before it is paused (memory bound under a flood of waits). */
const MAX_QUEUED = 10_000;

export async function runDelayStage<T>(opts: DelayStageOptions<T>): Promise<RunningDelayStage> {
  const log = opts.logger.child({ component: 'delay-stage', group: opts.groupId, topic: opts.topic });
  const now = opts.now ?? Date.now;
  const chunkSize = opts.chunkSize ?? 500;
  const queues = new Map<number, Queue<T>>();
  let stopped = false;

  const consumer = createStageConsumer(opts.kafka, opts.groupId, log, opts.onFatal, { maxWaitMs: IDLE_FETCH_WAIT_MS });
  const committer = new OffsetCommitter(consumer, log, undefined, opts.onFatal);

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

  /**
   * Handles `messages` of one partition in order until one is not yet due; `flush` produces the
   * outputs and commits up to the last handled offset. Returns the index, value and due time of
   * the first waiting record, if any. A retryable failure is thrown after flushing what was done.
   *
   * `messages` may be a partition's live queue, which a fetch extends meanwhile: records that
   * arrive while the last outputs are produced are handled too, and `allHandled` runs in the
   * same tick as the check that found none left, so the caller can drop the queue before another
   * fetch appends to it (dropped after an await, those records were resolved past and never
   * handled: a retry request lost, its message DEAD 3005 at its budget's end).
   */
  const handleUntilWaiting = async (
    partition: number,
    messages: readonly KafkaMessage[],
    first: { value: T } | undefined,
    flush: (out: OutRecord[], lastDone: string | undefined) => Promise<void>,
    allHandled?: () => void,
  ): Promise<{ index: number; value: T; due: number } | undefined> => {
    let out: OutRecord[] = [];
    let lastDone: string | undefined;
    let i = 0;
    for (;;) {
      for (; i < messages.length; i++) {
        const m = messages[i]!;
        const record: InRecord = toInRecord(opts.topic, partition, m);
        const started = performance.now();
        const decoded: Step<T> = i === 0 && first ? { kind: 'value', value: first.value } : await step(record, () => opts.decode(record));
        if (decoded.kind === 'retry') {
          await flush(out, lastDone);
          opts.onRecord?.('retry', record, performance.now() - started);
          throw decoded.error;
        }
        if (decoded.kind === 'poison') {
          out.push(...decoded.out);
          lastDone = m.offset;
          continue;
        }
        const due = opts.dueAt(decoded.value, record);
        if (due > now()) {
          await flush(out, lastDone);
          return { index: i, value: decoded.value, due };
        }
        const handled = await step(record, async () => {
          out.push(...(await opts.handle(decoded.value, record)));
          return decoded.value;
        });
        if (handled.kind === 'retry') {
          await flush(out, lastDone);
          opts.onRecord?.('retry', record, performance.now() - started);
          throw handled.error;
        }
        if (handled.kind === 'poison') out.push(...handled.out);
        else opts.onRecord?.('ok', record, performance.now() - started);
        lastDone = m.offset;
        if (out.length >= chunkSize) {
          await flush(out, lastDone);
          out = [];
          lastDone = undefined;
        }
      }
      await flush(out, lastDone);
      out = [];
      lastDone = undefined;
      if (i >= messages.length) {
        allHandled?.();
        return undefined;
      }
    }
  };

  const commitFlush =
    (partition: number, onDone?: (offset: string) => void) =>
    async (out: OutRecord[], lastDone: string | undefined): Promise<void> => {
      await produceAll(opts.producer, out);
      if (lastDone !== undefined) {
        onDone?.(lastDone);
        await committer.done(opts.topic, partition, lastDone);
      }
    };

  const arm = (partition: number, q: Queue<T>): void => {
    q.timer = setTimeout(() => void drain(partition), Math.min(MAX_PAUSE_MS, Math.max(0, q.first.due - now())));
    opts.onPause?.(partition, q.messages[0]!.offset, q.first.due);
  };

  const enqueue = (partition: number, messages: KafkaMessage[], first: { value: T; due: number }): void => {
    const q: Queue<T> = { messages, first, timer: undefined as unknown as NodeJS.Timeout, paused: false };
    queues.set(partition, q);
    arm(partition, q);
    log.debug({ partition, offset: messages[0]!.offset, dueInMs: first.due - now() }, 'partition waits for its next record to be due');
  };

  /** The head of a partition's queue is due: hands over what is due, waits again or finishes. */
  const drain = async (partition: number): Promise<void> => {
    const q = queues.get(partition);
    if (!q || stopped) return;
    let lastDone: string | undefined;
    let emptied = false;
    try {
      const waiting = await handleUntilWaiting(
        partition,
        q.messages,
        q.first,
        commitFlush(partition, (o) => (lastDone = o)),
        () => {
          if (queues.get(partition) !== q) return;
          queues.delete(partition);
          emptied = true;
        },
      );
      if (!emptied && queues.get(partition) !== q) return; // dropped by a rebalance meanwhile
      if (waiting) {
        q.messages = q.messages.slice(waiting.index);
        q.first = { value: waiting.value, due: waiting.due };
        arm(partition, q);
      }
      if (q.paused && (!waiting || q.messages.length < MAX_QUEUED)) {
        q.paused = false;
        consumer.resume([{ topic: opts.topic, partitions: [partition] }]);
      }
    } catch (err) {
      // Kafka or a dependency is away: drop the copy and read again from the first record not
      // handled (kafkajs retries from there, with its backoff).
      if (queues.get(partition) !== q) return;
      queues.delete(partition);
      const from = lastDone === undefined ? q.messages[0]!.offset : (BigInt(lastDone) + 1n).toString();
      log.warn({ err, partition, offset: from }, 'queued records could not be handed over; they are read again from Kafka');
      if (!stopped) {
        consumer.seek({ topic: opts.topic, partition, offset: from });
        if (q.paused) consumer.resume([{ topic: opts.topic, partitions: [partition] }]);
      }
    }
  };

  const eachBatch = async ({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> => {
    const partition = batch.partition;
    if (!isRunning() || isStale() || batch.messages.length === 0) return;
    const last = batch.messages[batch.messages.length - 1]!.offset;
    const q = queues.get(partition);
    if (q) {
      // Behind a waiting record: queued in order. The fetch position moves on (resolved), the
      // committed offset only when the records are handled.
      q.messages.push(...batch.messages);
      resolveOffset(last);
      if (!q.paused && q.messages.length >= MAX_QUEUED) {
        q.paused = true;
        consumer.pause([{ topic: opts.topic, partitions: [partition] }]);
      }
      await heartbeat();
      return;
    }
    const flush = commitFlush(partition, (o) => resolveOffset(o));
    let waiting: { index: number; value: T; due: number } | undefined;
    try {
      waiting = await handleUntilWaiting(partition, batch.messages, undefined, async (out, done) => {
        await flush(out, done);
        await heartbeat();
      });
    } catch (err) {
      const error = toReachError(err);
      log.warn({ err: error, code: error.code }, 'dependency failure; the batch is retried from the failed record');
      throw error;
    }
    if (waiting) {
      enqueue(partition, batch.messages.slice(waiting.index), { value: waiting.value, due: waiting.due });
      resolveOffset(last);
    }
  };

  // After a rebalance the partitions may belong to someone else: the queues are dropped (their
  // offsets were not committed, so whoever owns the partition now reads them again).
  consumer.on(consumer.events.GROUP_JOIN, () => {
    for (const q of queues.values()) clearTimeout(q.timer);
    queues.clear();
  });

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
    paused: () => new Map([...queues].map(([partition, q]) => [partition, q.first.due])),
    stop: async () => {
      stopped = true;
      for (const q of queues.values()) clearTimeout(q.timer);
      queues.clear();
      await committer.stopConsumer();
    },
  };
}
