import { randomBytes } from 'node:crypto';
import type { Kafka } from 'kafkajs';
import type { Logger } from '@reach/core';
import { IDLE_FETCH_WAIT_MS, leaveForCrashedMember, REBALANCE_TIMEOUT_MS } from './group-consumer.js';

/**
 * A local, in-memory view of a compacted topic (reach.agents.v1, reach.presence.v1): every
 * instance reads the whole topic from the beginning in a consumer group of its own that never
 * commits, folds each key's latest value (null = tombstone) and keeps following changes. This
 * is how routers hold the registry without a remote call per message (R-A6), and it keeps
 * working when Redis is down.
 */
export interface TableViewOptions<T> {
  kafka: Kafka;
  topic: string;
  logger: Logger;
  /** Group id prefix; a random suffix makes the group private to this instance. */
  groupPrefix: string;
  decode: (value: Buffer) => Promise<T>;
  /** Called for every change after it is applied (value null = deleted). */
  onChange?: (key: string, value: T | null, previous: T | undefined) => void;
  /** Decides whether an update replaces the current value (e.g. newer revision only). */
  accept?: (incoming: T, current: T | undefined) => boolean;
  /**
   * Called when the consumer crashed and kafkajs will not restart it: the view would otherwise
   * stop following its topic for good while its process looks healthy (a router that never
   * sees a new agent). Services pass ctx.fatal (exit for a supervised restart).
   */
  onFatal: (error: Error) => void;
}

export interface TableView<T> {
  get(key: string): T | undefined;
  entries(): IterableIterator<[string, T]>;
  readonly size: number;
  /** True once the view has read everything that was in the topic when it started. */
  readonly caughtUp: boolean;
  /** Resolves when caughtUp. */
  ready(): Promise<void>;
  stop(): Promise<void>;
}

export async function startTableView<T>(opts: TableViewOptions<T>): Promise<TableView<T>> {
  const log = opts.logger.child({ component: 'table', topic: opts.topic });
  const map = new Map<string, T>();
  const admin = opts.kafka.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(opts.topic);
  await admin.disconnect();
  // Partitions still to catch up: high watermark at start > 0.
  const behind = new Map<number, bigint>(ends.filter((p) => BigInt(p.high) > 0n).map((p) => [p.partition, BigInt(p.high)]));
  let caughtUp = behind.size === 0;
  let resolveReady: () => void = () => undefined;
  const readyPromise = caughtUp ? Promise.resolve() : new Promise<void>((r) => (resolveReady = r));

  const groupId = `${opts.groupPrefix}-${randomBytes(6).toString('hex')}`;
  const consumer = opts.kafka.consumer({
    groupId,
    maxWaitTimeInMs: IDLE_FETCH_WAIT_MS,
    sessionTimeout: 30_000,
    rebalanceTimeout: REBALANCE_TIMEOUT_MS,
  });
  leaveForCrashedMember(consumer, opts.kafka, groupId, log);
  consumer.on(consumer.events.CRASH, (event) => {
    const { error, restart } = event.payload as { error: Error; restart: boolean };
    if (restart) return; // kafkajs rejoins, and the view reads its topic again from the beginning
    log.fatal({ err: error }, 'table view consumer crashed and will not restart');
    opts.onFatal(error);
  });
  await consumer.connect();
  await consumer.subscribe({ topic: opts.topic, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch, heartbeat }) => {
      for (const m of batch.messages) {
        const key = m.key?.toString();
        if (key !== undefined) {
          const previous = map.get(key);
          if (m.value === null) {
            if (map.delete(key)) opts.onChange?.(key, null, previous);
          } else {
            try {
              const value = await opts.decode(m.value);
              if (!opts.accept || opts.accept(value, previous)) {
                map.set(key, value);
                opts.onChange?.(key, value, previous);
              }
            } catch (err) {
              log.warn({ err, key, offset: m.offset }, 'undecodable record in a table topic; skipped');
            }
          }
        }
        const want = behind.get(batch.partition);
        if (want !== undefined && BigInt(m.offset) + 1n >= want) {
          behind.delete(batch.partition);
          if (behind.size === 0 && !caughtUp) {
            caughtUp = true;
            log.info({ size: map.size }, 'table view caught up');
            resolveReady();
          }
        }
      }
      await heartbeat();
    },
  });
  return {
    get: (key) => map.get(key),
    entries: () => map.entries(),
    get size() {
      return map.size;
    },
    get caughtUp() {
      return caughtUp;
    },
    ready: () => readyPromise,
    stop: () => consumer.disconnect(),
  };
}
