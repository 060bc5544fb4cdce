import { ReachError, toReachError, type Logger, ERROR } from '@reach/core';
import type { Envelope, RoutedDelivery, SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type InRecord, type OutRecord, type Producer } from '@reach/kafka';
import { budgetStartOf } from '@reach/routing';
import { deadLetterRecord, statusRecord } from '@reach/service-kit';
import type { Tracer } from '@reach/tracing';
import type { Announcement } from './announcer.js';
import { tooLateToSend, windowEnd, type DeadlineHolds, type HeldDelivery } from './deadline-holds.js';
import { deliveryTrace } from './dispatch-span.js';
import { buildEntry, entryPartsOf, parseHead } from './entry.js';
import type { Failures } from './failures.js';
import { LANES, laneOf } from './lanes.js';
import type { DispatcherMetrics } from './metrics.js';
import type { Promoter } from './promotions.js';
import type { AppendResult, ReplayBuffer } from './replay-buffer.js';
import type { LaneBacklogReporter } from './lane-backlog.js';

/**
 * The dispatcher's stage: reach.routed.v1 in group `reach-dispatcher` (instances share the
 * partitions; a record's key is its agent, so one owner handles each agent in order). For a
 * batch of records the owner
 *
 *   1. stores each delivery in Redis (one pipeline): in the agent's replay buffer with its next
 *      seq when the agent has a free slot (fewer than max_concurrency un-acked) and nothing
 *      waits before it, else in the agent's waiting lane of its priority (replay-buffer.ts),
 *   2. announces the deliveries that have a seq at once (announcer.ts), and
 *   3. returns the DELIVERING events of the waiting ones (detail `{waiting: <lane>, instance}`)
 *      as its outputs: the batch stage produces them (acks=-1) before it commits the offsets.
 *
 * Nothing is produced before a send. A sent delivery's DELIVERING event (detail `{seq,
 * deadline, instance}`, `at` = when it was sent) is written by the instance that sent it,
 * together with the delivery's outcome, or alone once it has been unanswered for 250 ms
 * (sent-ledger.ts) — so an ack never makes a timeline go back. Nothing here waits for an agent,
 * nor for a slot (docs/design.md §8): a waiting delivery is durably in Redis and flows when an
 * ack, reject or missed ack deadline frees a slot — the script that frees it promotes the next
 * one. A record that cannot be decoded goes to reach.dlq.v1; a dependency failure (Redis,
 * Kafka, the schema registry) fails the batch, which kafkajs retries.
 *
 * A record may be consumed again (a retried batch, a rebalance or a restart before its offset
 * was committed): its delivery is not stored twice (replay-buffer.ts AppendResult). While it is
 * still in flight or waiting, steps 2 and 3 are repeated as they were — the first pass may have
 * failed before them, and both are harmless twice (states only move forward; a connection
 * never sends a seq twice); once it has moved on, nothing is.
 */
const ROUTED_SUBJECT = valueSubject(TOPICS.routed.name);

export interface RoutedConsumerDeps {
  service: string;
  instanceId: string;
  replayTtlS: number;
  codec: SchemaCodec;
  producer: Producer;
  buffer: ReplayBuffer;
  promoter: Promoter;
  announce(items: readonly Announcement[]): Promise<void>;
  metrics: DispatcherMetrics;
  log: Logger;
  /** Reserves each delivery's dispatch span (dispatch-span.ts). */
  tracer: Tracer;
  holds: DeadlineHolds;
  /** Ends a delivery routed with too little of its time left (DEAD 3005/3006, or a retry). */
  failures: Pick<Failures, 'records'>;
  /** Told of every delivery that went to a waiting lane (lane-backlog.ts). */
  backlog: Pick<LaneBacklogReporter, 'queued'>;
}

interface Accepted {
  /** With its ack deadline from now when it came late (withWindowFrom). */
  delivery: RoutedDelivery;
  /** The ack window the router gave it. */
  windowMs: number;
  envelope: Envelope;
  head: string;
  suffix: string;
  messagePart: string;
}

export function routedBatchHandler(d: RoutedConsumerDeps): (records: readonly InRecord[]) => Promise<readonly OutRecord[]> {
  return async (records) => {
    const dead: OutRecord[] = [];
    const accepted: Accepted[] = [];
    const consumedAt = Date.now();
    for (const record of records) {
      try {
        const routed = await d.codec.decode<RoutedDelivery>(ROUTED_SUBJECT, record.value);
        const windowMs = routed.deadline_at - routed.routed_at;
        const delivery = withWindowFrom(routed, windowMs, consumedAt);
        if (!delivery.agent_id) throw new ReachError('INVALID_ENVELOPE', 'routed delivery without agent_id', { details: { field: 'agent_id' } });
        const trace = deliveryTrace(d.tracer, record.headers.traceparent, delivery.envelope.trace_id, consumedAt);
        accepted.push({ delivery, windowMs, ...entryPartsOf(delivery, d.replayTtlS, consumedAt, trace, record) });
      } catch (err) {
        const error = toReachError(err);
        // The schema registry being away is no reason to dead-letter a good record.
        if (error.retryable && error.codeName !== 'INTERNAL') throw error;
        d.log.warn({ err: error, partition: record.partition, offset: record.offset }, 'undecodable routed delivery sent to the DLQ');
        d.metrics.poisonRecords.inc({ topic: record.topic, parked: 'dlq' });
        dead.push(deadLetterRecord(d.codec, { service: d.service, error, record }));
      }
    }
    // Past its budget already, or too close to its end to be answered (it waited out a broker
    // restart upstream, or a retry was routed just before its expire_at): not sent — an agent
    // running it meanwhile would do the work for a message its sender is told is dead
    // (`pnpm chaos --long`: DEAD, then DELIVERED). Failed here at once, as a wait that ran out
    // (2002, not the agent's fault): Failures ends it DEAD 3005/3006. Left to the stuck sweep,
    // it stayed ROUTED for seconds past its end (a retry routed 190 ms before expire_at: DEAD
    // 4.1 s later).
    const overBudget = accepted.filter((a) => pastBudget(a.delivery, consumedAt));
    if (overBudget.length > 0) {
      d.log.info({ count: overBudget.length }, 'routed deliveries with too little time left: not sent, failed');
      accepted.splice(0, accepted.length, ...accepted.filter((a) => !overBudget.includes(a)));
      for (const a of overBudget) dead.push(...(await tooLateRecords(d, a, consumedAt)));
    }
    if (accepted.length === 0) return dead;

    // Each delivery's ack deadline is registered with it; the deadline sweeper fails it if unanswered.
    const now = Date.now();
    const phase = phaseTimer(d.metrics);
    d.metrics.batchRecords.observe(accepted.length);
    const { results, promotions } = await d.buffer.appendMany(
      accepted.map((a) => {
        const r = a.delivery;
        return {
          agent: r.agent_id,
          messageId: r.message_id,
          head: a.head,
          attempt: r.attempt,
          messagePart: a.messagePart,
          deadline: r.deadline_at,
          windowMs: a.windowMs,
          budgetAt: r.budget_deadline_at,
          lane: laneOf(a.envelope.priority),
          // A waiting delivery gives up with its budget (or expiry); one without either after
          // as long as a buffered delivery stays replayable.
          waitDeadline: r.budget_deadline_at ?? a.envelope.expire_at ?? now + d.replayTtlS * 1000,
        };
      }),
      now,
    );
    phase('append');
    // Promoted on the way (a raised max_concurrency): already buffered with their seqs, so they
    // go out now, whatever happens to the rest of the batch.
    d.promoter.handle(promotions);
    // A waiting delivery's DELIVERING says which lane it waits in; it is an output of the batch
    // (the sent ones get theirs from the ledger: sent-ledger.ts).
    const waiting = accepted.flatMap((a, i) => {
      const res = results[i]!;
      if (res.kind !== 'waiting') return [];
      const lane = LANES[laneOf(a.envelope.priority)];
      d.backlog.queued(a.delivery.agent_id);
      if (!res.repeat) d.metrics.queued.inc({ priority: lane });
      return statusRecord(d.codec, {
        state: 'DELIVERING',
        envelope: a.envelope,
        service: d.service,
        instance: d.instanceId,
        attempt: a.delivery.attempt,
        agentId: a.delivery.agent_id,
        parentMessageId: a.delivery.parent_message_id,
        detail: { waiting: lane, instance: d.instanceId },
      });
    });
    // Their ack deadlines are held until they are sent (deadline-holds.ts); a batch that comes
    // again renews them first (its stored deliveries keep the deadline of the first pass).
    const held = heldDeliveries(accepted, results);
    d.holds.begin(held);
    if (results.some((r) => r.kind === 'inflight' && r.repeat)) await d.holds.renew(held);
    const repeats = results.filter((r) => r.kind === 'moved' || r.repeat).length;
    d.metrics.routed.inc(accepted.length - repeats);
    if (repeats > 0) d.log.debug({ repeats, count: accepted.length }, 'routed deliveries consumed again: not stored twice');
    // The same rule after the append (a Redis that was slow to answer): a delivery whose budget
    // ended meanwhile is not sent (the deadline sweeper ends it DEAD 3005 at its deadline; an
    // agent given it would do work its sender is told is dead — `pnpm chaos --via kafka`: 21
    // "DEAD though acked" around a broker kill).
    const sentAt = Date.now();
    const fresh: Announcement[] = [];
    let expired = 0;
    accepted.forEach((a, i) => {
      const res = results[i]!;
      if (res.kind !== 'inflight') return;
      if (pastBudget(a.delivery, sentAt)) {
        expired++;
        return;
      }
      fresh.push({
        agent: a.delivery.agent_id,
        seq: res.seq,
        // A repeat goes out as it was stored the first time (its deadline, its trace context).
        entry: res.repeat ? res.entry : buildEntry(a.head, res.seq, a.suffix),
        messageId: a.delivery.message_id,
        traceId: a.envelope.trace_id,
      });
    });
    if (expired > 0) d.log.info({ count: expired }, 'routed deliveries whose budget ended while they were stored: not sent (DEAD 3005 at their deadline)');
    await d.announce(fresh);
    phase('announce');
    d.holds.end(held);
    // Routed to an agent whose socket already died: failed over now, not at the ack deadline.
    // Off the batch's path (measured: ~20 ms a batch at 1,000 msg/s, waiting for Redis): the
    // next batch need not wait for it, and should it fail, the ack deadline fails them over.
    const lostCheck = phaseTimer(d.metrics);
    void d.buffer
      .pullDeadlinesOfLost(held)
      .then((pulled) => {
        lostCheck('lost_check');
        if (pulled > 0) d.log.info({ count: pulled }, 'deliveries for agents whose socket died: failed over at once');
      })
      .catch((err: unknown) => d.log.warn({ err }, 'could not check for lost agents; their deliveries fail over at the ack deadline'));
    // Produced by the batch stage before it commits the offsets, after the sends.
    return [...dead, ...waiting];
  };
}

/**
 * The delivery's budget (if it has one) ends within MIN_SEND_BUDGET_MS (a quarter of a shorter
 * budget; not of the ack window, which the router already cut to the budget's end) of `now`: too late to
 * send. An agent given it would answer after the deadline sweep ended it DEAD 3005, doing work
 * its sender is told is dead (`pnpm chaos --via kafka`: 19 "DEAD though acked", each sent with
 * tens of milliseconds of budget left after a broker restart).
 */
/** The records that end (or retry) a delivery not sent for lack of time (Failures decides). */
async function tooLateRecords(d: RoutedConsumerDeps, a: Accepted, now: number): Promise<readonly OutRecord[]> {
  const head = parseHead(a.head);
  if (!head) return [];
  const left = (a.delivery.budget_deadline_at ?? now) - now;
  const { records } = await d.failures.records(
    {
      agent: a.delivery.agent_id,
      envelope: a.envelope,
      head,
      code: ERROR.SATURATED,
      reason: `routed with ${Math.max(0, left)} ms of its time left, too little to be answered: not sent`,
      failureRetryable: true,
      oncePerAttempt: true,
      detail: { not_sent: true, time_left_ms: Math.max(0, left) },
    },
    now,
  );
  return records;
}

export function pastBudget(r: RoutedDelivery, now: number): boolean {
  return tooLateToSend(r.budget_deadline_at, budgetStartOf(r.envelope), now);
}

/** Observes the time since the previous phase ended (or since it was made) under each phase's name. */
function phaseTimer(metrics: DispatcherMetrics): (name: string) => void {
  let last = performance.now();
  return (name) => {
    const t = performance.now();
    metrics.batchPhaseSeconds.observe({ phase: name }, (t - last) / 1000);
    last = t;
  };
}

function heldDeliveries(accepted: readonly Accepted[], results: readonly AppendResult[]): HeldDelivery[] {
  return accepted.flatMap((a, i) => {
    const res = results[i]!;
    if (res.kind !== 'inflight') return [];
    const r = a.delivery;
    return [{ agent: r.agent_id, seq: res.seq, windowMs: a.windowMs, budgetAt: r.budget_deadline_at ?? null }];
  });
}

/**
 * A delivery consumed late — behind a lag, or after a broker restart held it in the topic — gets
 * its whole ack window from now (within its budget) instead of what is left of the router's:
 * otherwise its deadline passed before it was even stored, the sweeper retried it on another
 * agent at once, and the first agent ran it too.
 */
export function withWindowFrom(r: RoutedDelivery, windowMs: number, now: number): RoutedDelivery {
  const deadline = windowEnd(now, windowMs, r.budget_deadline_at ?? null);
  return deadline - r.deadline_at > LATE_MS ? { ...r, deadline_at: deadline } : r;
}

/** Later than this after routing, a delivery's window restarts (the usual hop takes a few ms). */
const LATE_MS = 1_000;
