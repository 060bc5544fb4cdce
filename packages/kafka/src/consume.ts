import type { Consumer, EachBatchPayload, Kafka, Producer } from 'kafkajs';
import { toReachError, type Logger, type ReachError, TRACEPARENT_HEADER } from '@reach/core';
import { NOOP_SPAN, NOOP_TRACER, withTraceparent, type StageSpan, type Tracer } from '@reach/tracing';
import { produceAll, toInRecord, type InRecord, type OutRecord } from './records.js';
import { createStageConsumer, DEFAULT_PARTITION_CONCURRENCY, keepBeating, OffsetCommitter, type ConsumerRetryOptions } from './group-consumer.js';

/**
 * The consume loop every stage runs: decode → handle → produce outputs → commit.
 *
 * - Offsets are resolved only after the outputs of those records are durably produced
 *   (acks=-1), so a crash replays records instead of losing them (at-least-once).
 * - A record whose handler fails with a non-retryable error is a poison record: `onPoison`
 *   turns it into outputs (a DLQ entry) and the partition moves on; it never blocks nor
 *   crashes the loop.
 * - A retryable failure (a dependency is down) stops the batch after producing and resolving
 *   what succeeded; kafkajs retries from the first unresolved record with backoff.
 * - Handlers never sleep or wait for an agent: delays live on retry topics.
 * - With a tracer on and a `spanName`, each record is handled inside a span, the child of the
 *   record's `traceparent` header; outputs that carry that same header are re-pointed to the
 *   span, so the next stage's span is its child (R-F1). Off, nothing changes.
 */
export interface StageHandlerContext {
  readonly log: Logger;
  /** The record's span (attributes, failure); NOOP_SPAN when tracing is off. */
  readonly span: StageSpan;
  /**
   * True when no other group member can have handled this record: it was written after this
   * member got its partition (FreshOffsets). False means "maybe": a record consumed again after
   * a crash or a rebalance, or one from before the assignment.
   */
  readonly fresh: boolean;
}

/**
 * Per partition, the first offset written after this member got the partition: the high
 * watermark of the first batch fetched after the latest join. That watermark is at or past the
 * log's end at the assignment, so a record at or beyond it reached no earlier owner (an earlier
 * owner only ever fetched records already in the log). Until that first batch, and after every
 * rejoin, nothing is fresh.
 */
export class FreshOffsets {
  private readonly from = new Map<string, bigint>();

  /** The group was (re)joined: the partitions may have moved, so what was fresh is not any more. */
  joined(): void {
    this.from.clear();
  }

  /** A fetched batch: the first one of a partition since the join sets where fresh records begin. */
  batch(topic: string, partition: number, highWatermark: string): void {
    const key = `${topic}:${partition}`;
    if (!this.from.has(key)) this.from.set(key, BigInt(highWatermark));
  }

  isFresh(topic: string, partition: number, offset: string): boolean {
    const from = this.from.get(`${topic}:${partition}`);
    return from !== undefined && BigInt(offset) >= from;
  }
}

export interface RunStageOptions {
  kafka: Kafka;
  producer: Producer;
  groupId: string;
  topics: readonly string[];
  logger: Logger;
  /** Read from the earliest offset when the group has no committed offset (default true). */
  fromBeginning?: boolean;
  /** Records of one batch handled at once; outputs keep record order (default 1). */
  concurrency?: number;
  /** Partitions processed in parallel (default DEFAULT_PARTITION_CONCURRENCY; order within a partition is kept). */
  partitionsConsumedConcurrently?: number;
  /** Max records handled before their outputs are produced and offsets resolved (default 500). */
  chunkSize?: number;
  handle: (record: InRecord, ctx: StageHandlerContext) => Promise<readonly OutRecord[]>;
  onPoison: (record: InRecord, error: ReachError) => readonly OutRecord[] | Promise<readonly OutRecord[]>;
  /** Called when kafkajs gives up on the consumer: the process should exit for a supervised restart. */
  onFatal: (error: Error) => void;
  /** How often produced offsets are committed (default 1000 ms). */
  commitIntervalMs?: number;
  /** Observes every handled record (for metrics). */
  onRecord?: (outcome: 'ok' | 'poison' | 'retry', record: InRecord, ms: number) => void;
  /**
   * Overrides the consumer's kafkajs retry settings. Services leave it unset; the degradation
   * test uses it to make kafkajs give up on a consumer (no restart) and check onFatal's exit.
   */
  consumerRetry?: ConsumerRetryOptions;
  /** Spans per record when enabled (default: the no-op tracer). */
  tracer?: Tracer;
  /** The name of each record's span (e.g. `route`); unset: no span per record. */
  spanName?: string;
}

export interface RunningStage {
  readonly consumer: Consumer;
  stop(): Promise<void>;
}

async function mapOrdered<T, R>(items: readonly T[], concurrency: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  if (concurrency <= 1) {
    const out: R[] = [];
    for (const item of items) out.push(await fn(item));
    return out;
  }
  const out = new Array<R>(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  });
  await Promise.all(workers);
  return out;
}

/** The span a stage handles `record` in: the child of its traceparent header; NOOP_SPAN without a name (tracing off). */
export function recordSpan(tracer: Tracer, name: string | undefined, record: InRecord): StageSpan {
  if (name === undefined || !tracer.enabled) return NOOP_SPAN;
  return tracer.startSpan(name, {
    parent: record.headers[TRACEPARENT_HEADER],
    kind: 'consumer',
    attributes: {
      'messaging.system': 'kafka',
      'messaging.destination.name': record.topic,
      'messaging.kafka.partition': record.partition,
      'messaging.kafka.offset': record.offset,
    },
  });
}

type Outcome = { kind: 'ok'; out: readonly OutRecord[] } | { kind: 'retry'; error: ReachError };

export async function runStage(opts: RunStageOptions): Promise<RunningStage> {
  const log = opts.logger.child({ component: 'stage', group: opts.groupId });
  const consumer = createStageConsumer(opts.kafka, opts.groupId, log, opts.onFatal, undefined, opts.consumerRetry);
  const committer = new OffsetCommitter(consumer, log, opts.commitIntervalMs, opts.onFatal);
  const chunkSize = opts.chunkSize ?? 500;
  const concurrency = opts.concurrency ?? 1;
  const tracer = opts.tracer ?? NOOP_TRACER;
  const spanName = opts.spanName;

  const fresh = new FreshOffsets();
  consumer.on(consumer.events.GROUP_JOIN, () => fresh.joined());

  const handleOne = async (record: InRecord): Promise<Outcome> => {
    const started = performance.now();
    const span = recordSpan(tracer, spanName, record);
    try {
      const out = await opts.handle(record, { log, span, fresh: fresh.isFresh(record.topic, record.partition, record.offset) });
      opts.onRecord?.('ok', record, performance.now() - started);
      return { kind: 'ok', out: withTraceparent(out, record.headers[TRACEPARENT_HEADER], span.traceparent) };
    } catch (err) {
      const error = toReachError(err);
      span.fail(error);
      if (error.retryable && error.codeName !== 'INTERNAL') {
        opts.onRecord?.('retry', record, performance.now() - started);
        return { kind: 'retry', error };
      }
      opts.onRecord?.('poison', record, performance.now() - started);
      log.warn({ err: error, code: error.code, topic: record.topic, partition: record.partition, offset: record.offset }, 'poison record sent to the DLQ');
      return { kind: 'ok', out: await opts.onPoison(record, error) };
    } finally {
      span.end();
    }
  };

  const eachBatch = async ({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> => {
    const msgs = batch.messages;
    fresh.batch(batch.topic, batch.partition, batch.highWatermark);
    for (let start = 0; start < msgs.length; start += chunkSize) {
      if (!isRunning() || isStale()) return;
      const records: InRecord[] = msgs.slice(start, start + chunkSize).map((m) => toInRecord(batch.topic, batch.partition, m));
      const outcomes = await keepBeating(heartbeat, mapOrdered(records, concurrency, handleOne));
      const firstRetry = outcomes.findIndex((o) => o.kind === 'retry');
      const done = firstRetry === -1 ? outcomes.length : firstRetry;
      const out: OutRecord[] = [];
      for (let i = 0; i < done; i++) out.push(...(outcomes[i] as { out: readonly OutRecord[] }).out);
      await keepBeating(heartbeat, produceAll(opts.producer, out));
      if (done > 0) {
        const last = records[done - 1]!;
        resolveOffset(last.offset);
        await committer.done(last.topic, last.partition, last.offset);
      }
      await heartbeat();
      if (firstRetry !== -1) {
        const { error } = outcomes[firstRetry] as { error: ReachError };
        log.warn({ err: error, code: error.code }, 'dependency failure; the batch is retried from the failed record');
        throw error;
      }
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
  log.info({ topics: opts.topics }, 'stage consuming');
  return {
    consumer,
    // stop() lets the batch in hand finish, commits what was produced, then leaves the group.
    stop: () => committer.stopConsumer(),
  };
}
