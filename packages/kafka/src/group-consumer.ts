import type { Consumer, Kafka, RetryOptions } from 'kafkajs';
import type { Logger } from '@reach/core';
import { leaveGroupMembers } from './leave-group.js';
import { memberLedgerOf } from './member-ledger.js';

/**
 * Partitions a loop handles at once. Order within a partition is always kept; handling several
 * at a time lets their outputs share one produce request (see produceAll).
 */
export const DEFAULT_PARTITION_CONCURRENCY = 8;

/**
 * How long a rebalance waits for the group's members to rejoin. kafkajs restarts a consumer
 * that crashed (e.g. "no broker available" while the broker restarts) under a NEW member id, so
 * the coordinator, which reloaded the old member with the group, waits for it to rejoin until
 * this timeout (or its session timeout) removes it — and the stage consumes nothing meanwhile.
 * kafkajs's default (60 s, capped by the 30 s session) stalled the dispatcher for 30 s after a
 * broker restart (seen in CI: messages sent right after died of their 30 s budget). Members
 * heartbeat between chunks of a batch, so a live member rejoins well within 10 s.
 */
export const REBALANCE_TIMEOUT_MS = 10_000;

/**
 * How long a fetch waits on the broker when there is nothing to read. The broker answers as
 * soon as any fetched partition has a record (minBytes 1), so this never delays a record; it
 * only sets how often an idle consumer asks again. At 100 ms the idle stack's 13 consumers made
 * ~230 fetches/s and burned ~45 % of a core (Kafka ~10 %, each service 3–5 %). kafkajs checks
 * its heartbeat between fetches, so this also bounds how late a member notices a rebalance.
 */
export const IDLE_FETCH_WAIT_MS = 1_000;

/**
 * How long the coordinator keeps a silent member, and how often members heartbeat. kafkajs has
 * no static membership: a member killed with SIGKILL (or its restarted self, which joins under a
 * new member id) holds its partitions until this session runs out, so it bounds takeover. At
 * 30 s a killed service's stage stalled 14–17.5 s (rebalance timeout); at 6 s (Kafka's default
 * group.min.session.timeout.ms) takeover is ~6–7 s. Shorter would need the broker's minimum
 * lowered and would evict live members whose event loop stalls a few seconds under load:
 * kafkajs heartbeats from the consume loop itself (between fetches and between chunks).
 */
export const SESSION_TIMEOUT_MS = 6_000;
export const HEARTBEAT_INTERVAL_MS = 1_000;

/**
 * How long a member keeps heartbeating while one chunk of a batch is being handled
 * (keepBeating). Beyond it a wedged handler no longer holds its partitions: the coordinator
 * evicts the member after its session and the partitions move (Kafka's max.poll.interval plays
 * this part for the Java client).
 */
export const BUSY_HEARTBEAT_MAX_MS = 60_000;

/**
 * Resolves with `work`, heartbeating every HEARTBEAT_INTERVAL_MS while it runs (for at most
 * BUSY_HEARTBEAT_MAX_MS). kafkajs heartbeats only from the consume loop: between fetches and
 * where a handler calls `heartbeat()`, i.e. between chunks. A chunk that takes longer than the
 * session (6 s) got the member evicted: a tracker catching up after a kill writes a whole fetch
 * at once, its commits then failed ("the coordinator is not aware of this member"), it rejoined,
 * consumed the same records again and was evicted again (`pnpm chaos --via kafka`, 300 msg/s:
 * four minutes of that, 32,690 messages unread in the read model, until the commit watchdog
 * restarted it). kafkajs shares one heartbeat request among concurrent callers. A heartbeat that
 * fails here (a rebalance in progress) is left to the loop, whose own next heartbeat rejoins.
 */
export async function keepBeating<T>(heartbeat: () => Promise<void>, work: Promise<T>, maxMs = BUSY_HEARTBEAT_MAX_MS): Promise<T> {
  const started = Date.now();
  const timer = setInterval(() => {
    if (Date.now() - started >= maxMs) return clearInterval(timer);
    heartbeat().catch(() => undefined);
  }, HEARTBEAT_INTERVAL_MS);
  try {
    return await work;
  } finally {
    clearInterval(timer);
  }
}

/**
 * What every consume loop of Agent-Reach shares: the consumer-group settings, the crash policy
 * (a consumer kafkajs will not restart makes the process exit for a supervised restart instead
 * of living on with a dead consumer), and offset commits.
 */
/** kafkajs consumer retry settings, including whether a crashed consumer is restarted. */
export type ConsumerRetryOptions = RetryOptions & { restartOnFailure?: (error: Error) => Promise<boolean> };

/**
 * How much a fetch waits for: the broker answers once `minBytes` are there or `maxWaitMs` has
 * passed. minBytes 1 (the default) answers at the first record: lowest latency. A bulk writer
 * sets more, so the broker gathers a batch (a linger at the broker, no timer here).
 */
export interface FetchWait {
  maxWaitMs: number;
  minBytes?: number;
  /**
   * A linger on this side instead (runBatchStage): after a fetch that reached the head of the
   * log, the next one is asked for this much later, so it gathers that much more (with records
   * still waiting — a backlog — at once). Unlike a broker-side
   * gather (minBytes with a short maxWaitMs), an idle consumer still asks only every maxWaitMs.
   */
  lingerMs?: number;
}

/**
 * How long the LeaveGroup for a crashed member keeps trying. A consumer crashes when the broker
 * goes away ("no broker available"), so the leave must outlast a broker restart: with 5 s it gave
 * up while the broker was still down, the coordinator then loaded the group with the old member
 * in it, and the restarted consumer's join waited out that member's 6 s session (the router idle
 * 6 s after a broker kill, 5 December). Retried while the coordinator is away or loading.
 */
export const CRASHED_MEMBER_LEAVE_MS = 30_000;

/**
 * When kafkajs restarts a crashed consumer (e.g. its coordinator gone with a broker restart), it
 * rejoins under a new member id, and the coordinator holds the rebalance for the old one, which
 * kafkajs could not leave while the broker was away: up to the rebalance timeout with nothing
 * consumed. This leaves for the old member id as soon as the consumer crashed, and keeps trying
 * until the coordinator is back (CRASHED_MEMBER_LEAVE_MS).
 */
export function leaveForCrashedMember(consumer: Consumer, kafka: Kafka, groupId: string, log: Logger, deadlineMs = CRASHED_MEMBER_LEAVE_MS): void {
  let memberId: string | undefined;
  consumer.on(consumer.events.GROUP_JOIN, (event) => (memberId = event.payload.memberId));
  consumer.on(consumer.events.CRASH, (event) => {
    const old = memberId;
    memberId = undefined;
    if (!(event.payload as { restart: boolean }).restart || old === undefined) return;
    leaveGroupMembers(kafka, [{ groupId, memberId: old }], { deadlineMs }).catch((err: unknown) =>
      log.debug({ err }, 'could not leave for the crashed member; the coordinator waits for it instead'),
    );
  });
}

export function createStageConsumer(
  kafka: Kafka,
  groupId: string,
  log: Logger,
  onFatal: (error: Error) => void,
  wait: FetchWait = { maxWaitMs: IDLE_FETCH_WAIT_MS },
  retry: ConsumerRetryOptions = {},
): Consumer {
  const consumer = kafka.consumer({
    groupId,
    allowAutoTopicCreation: false,
    sessionTimeout: SESSION_TIMEOUT_MS,
    rebalanceTimeout: REBALANCE_TIMEOUT_MS,
    heartbeatInterval: HEARTBEAT_INTERVAL_MS,
    maxWaitTimeInMs: wait.maxWaitMs,
    minBytes: wait.minBytes ?? 1,
    // Retries at most a second apart: after a broker restart the coordinator answers "loading"
    // for a while, and kafkajs's backoff grew to 10 s between join attempts — a stage stayed
    // idle for ~20 s after the broker was back. 30 retries ≈ 30 s before the consumer crashes.
    retry: { retries: 30, initialRetryTime: 100, maxRetryTime: 1_000, ...retry },
  });
  const ledger = memberLedgerOf(kafka);
  if (ledger) {
    consumer.on(consumer.events.GROUP_JOIN, (event) => {
      try {
        ledger.joined(event.payload.groupId, event.payload.memberId);
      } catch (err) {
        log.warn({ err, file: ledger.file }, 'could not record the group member id; a crash then waits out the session');
      }
    });
  }
  leaveForCrashedMember(consumer, kafka, groupId, log);
  consumer.on(consumer.events.CRASH, (event) => {
    const { error, restart } = event.payload as { error: Error; restart: boolean };
    if (restart) {
      log.warn({ err: error }, 'consumer crashed; kafkajs restarts it');
      return;
    }
    log.fatal({ err: error }, 'consumer crashed and will not restart');
    onFatal(error);
  });
  return consumer;
}

/**
 * How long done records may fail to commit before the loop counts as wedged. A broker restart
 * or a rebalance fails commits for seconds (a broker restart here ~15–25 s); a consumer kafkajs
 * left behind a broker restart failed them with "the coordinator is not aware of this member"
 * for good (`pnpm chaos --long`: the tracker for 15 minutes, its offsets — and with them the
 * stuck sweep, which waits for the read model — frozen). A restarted process rejoins and
 * replays from the last commit (at-least-once).
 */
export const COMMIT_STUCK_MS = 60_000;

/**
 * Commits the offsets of records whose outputs are durably produced, from a timer. Loops run
 * kafkajs with autoCommit off: its autoCommit path adds ~35 ms to every fetch cycle (measured
 * with a 6-partition topic at 1,000 msg/s: p50 37 ms with autoCommit, 1 ms with this).
 * A crash between produce and commit replays those records (at-least-once).
 */
export class OffsetCommitter {
  private readonly ready = new Map<string, { topic: string; partition: number; offset: string }>();
  private readonly timer: NodeJS.Timeout;
  /** Set by stopConsumer: batches then commit as they finish, while the group is still joined. */
  private stopping = false;
  /** When the commits of done records began to fail (undefined: the last one went through). */
  private failingSince: number | undefined;
  private stuckReported = false;

  /**
   * @param onStuck called once when done records could not be committed for COMMIT_STUCK_MS:
   *   the loop's consumer is wedged, and the caller exits for a supervised restart.
   */
  constructor(
    private readonly consumer: Consumer,
    private readonly log: Logger,
    intervalMs = 1000,
    private readonly onStuck: (error: Error) => void = () => undefined,
  ) {
    this.timer = setInterval(() => void this.flush(), intervalMs);
    this.timer.unref();
    // After a rebalance the partitions may belong to someone else: drop what we meant to commit.
    consumer.on(consumer.events.GROUP_JOIN, () => this.ready.clear());
  }

  /**
   * The record at `offset` and everything before it in its partition are done. Await it: while
   * the consumer is stopping it commits at once, because kafkajs leaves the group as soon as the
   * batch in hand returns and a commit after that fails (the next owner would replay the batch).
   */
  async done(topic: string, partition: number, offset: string): Promise<void> {
    this.ready.set(`${topic}:${partition}`, { topic, partition, offset: (BigInt(offset) + 1n).toString() });
    if (this.stopping) await this.flush();
  }

  async flush(): Promise<void> {
    if (this.ready.size === 0) return;
    const snapshot = [...this.ready.values()];
    try {
      await this.consumer.commitOffsets(snapshot);
      this.failingSince = undefined;
      for (const c of snapshot) {
        const key = `${c.topic}:${c.partition}`;
        if (this.ready.get(key)?.offset === c.offset) this.ready.delete(key);
      }
    } catch (err) {
      // A rebalance moved the partitions: the new owner replays those records.
      this.log.debug({ err }, 'offset commit failed; retried on the next tick');
      this.failingSince ??= Date.now();
      if (!this.stopping && !this.stuckReported && Date.now() - this.failingSince >= COMMIT_STUCK_MS) {
        this.stuckReported = true;
        this.log.fatal({ err }, `offsets not committed for ${COMMIT_STUCK_MS / 1000} s: the consumer is wedged; exiting for a restart`);
        this.onStuck(err instanceof Error ? err : new Error(String(err)));
      }
    }
  }

  /**
   * Commits what is done, lets the batch in hand finish and commit (see done), then leaves the
   * group: a graceful stop or restart replays nothing.
   */
  async stopConsumer(): Promise<void> {
    clearInterval(this.timer);
    this.stopping = true;
    await this.flush();
    await this.consumer.stop();
    await this.consumer.disconnect();
  }
}
