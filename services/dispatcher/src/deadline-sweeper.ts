import { DueDrivenJob, type WakeAlarm } from '@reach/service-kit';
import { ERROR, type Logger } from '@reach/core';
import { produceAll, type OutRecord, type Producer } from '@reach/kafka';
import type { Claimed, DeadlineClaims } from './deadlines.js';
import { envelopeOfEntry, headOf, parseHead, parseWaitingEntry } from './entry.js';
import type { Failures } from './failures.js';
import { LANES } from './lanes.js';
import type { DispatcherMetrics } from './metrics.js';
import { parseDeadlineMember, parseWaitMember, type Promotion, type ReplayBuffer } from './replay-buffer.js';

/**
 * Ack deadlines without blocking a partition (R-C7, R-D3): the consumer only buffers a
 * delivery and registers its deadline; this sweeper, on every instance, claims the deadlines
 * that are due and turns each still-unanswered delivery into a failed attempt (3002
 * ACK_TIMEOUT): the entry leaves the agent's replay buffer (the agent that missed it never
 * gets it replayed; its late ack is ignored) and `Failures` schedules the retry on another
 * agent, or ends the message. A delivery answered meanwhile is simply gone from the buffer.
 *
 * The take frees a slot of the agent: what the buffer promoted into it goes to `promoted`.
 *
 * Wait deadlines the same way: a delivery still waiting for a free slot of its agent when its
 * budget or expire_at ends leaves its lane and fails with 2002 SATURATED, which `Failures`
 * turns into DEAD 3006 / 3005 (or, for a message with time left, a retry on another agent).
 *
 * If producing the outcome fails, the entry goes back where it was and the claim is left to
 * expire, so another sweep (here or on another instance) tries again: never a silent loss.
 */
export interface DeadlineSweeperDeps {
  claims: DeadlineClaims;
  waitClaims: DeadlineClaims;
  promoted: (promotions: readonly Promotion[]) => void;
  buffer: ReplayBuffer;
  failures: Failures;
  producer: Producer;
  metrics: DispatcherMetrics;
  log: Logger;
  /** The sweep's granularity: rounds are at least this far apart. */
  intervalMs: number;
  /** Rounds are at most this far apart, whatever the next due time (IDLE_SWEEP_GAP_MS). */
  maxGapMs?: number;
  /** Rung by the replay buffer with each deadline it writes that may come before the next round. */
  alarm: WakeAlarm;
  /** Deadlines claimed per round. */
  batch?: number;
}

/**
 * How long a sweeper sleeps when nothing it knows of is due. Each round reads the next deadline
 * (this instance's and every other's) and the buffer wakes it for the deadlines it writes, so
 * this only bounds how late a deadline written by another instance after this round is seen —
 * which matters only when that instance dies before sweeping it itself.
 */
export const IDLE_SWEEP_GAP_MS = 1_000;

/** How long the ack deadlines that came due while Redis was away wait for the answers still on their way. */
export const REJOIN_MS = 3_000;

export class DeadlineSweeper {
  private readonly job: DueDrivenJob;
  /** When the first failing sweep of an outage ran (undefined: the last sweep worked). */
  private awaySince: number | undefined;

  constructor(private readonly d: DeadlineSweeperDeps) {
    const gaps = { minGapMs: d.intervalMs, maxGapMs: Math.max(d.intervalMs, d.maxGapMs ?? IDLE_SWEEP_GAP_MS) };
    this.job = new DueDrivenJob('deadline sweep', gaps, async () => (await this.round()).next, d.log);
    d.alarm.answer((at) => this.job.wakeAt(at));
  }

  start(): void {
    this.job.start();
  }

  stop(): Promise<void> {
    return this.job.stop();
  }

  /** One round: claims what is due (in batches) and settles it. Resolves to how many it settled. */
  async sweep(now: number = Date.now()): Promise<number> {
    return (await this.round(now)).count;
  }

  /** One round, and the earliest deadline left after it (epoch ms; undefined: none). */
  private async round(now: number = Date.now()): Promise<{ count: number; next: number | undefined }> {
    if (this.awaySince !== undefined) await this.afterOutage(now);
    const [acks, waits] = await Promise.all([
      this.sweepOf(this.d.claims, (m) => this.expire(m, now), now),
      this.sweepOf(this.d.waitClaims, (m) => this.expireWaiting(m, now), now),
    ]);
    const next = Math.min(acks.next ?? Infinity, waits.next ?? Infinity);
    return { count: acks.count + waits.count, next: Number.isFinite(next) ? next : undefined };
  }

  /** Claims what is due; a claim that fails means Redis is away (not a failed produce while settling). */
  private async claim(claims: DeadlineClaims, now: number, limit: number): Promise<Claimed> {
    try {
      return await claims.claimDue(now, limit);
    } catch (err) {
      this.awaySince ??= now;
      throw err;
    }
  }

  /**
   * Back from a sweep that failed (Redis away): the answers agents sent meanwhile are still
   * on their way — each dispatcher tries them again until Redis takes them (answer-retry.ts),
   * and agents resend theirs after a reconnect. Claimed at once, the deadlines that passed
   * during the outage would fail those deliveries over, and another agent would run them again.
   * So every ack deadline due before now + REJOIN_MS (Redis's clock) moves to then first (never
   * earlier).
   */
  private async afterOutage(now: number): Promise<void> {
    const { moved, until } = await this.d.buffer.deferDeadlinesFor(REJOIN_MS);
    this.d.log.info(
      { away_ms: now - this.awaySince!, deferred: moved, until: new Date(until).toISOString() },
      'deadline sweeps resume after an outage: due ack deadlines deferred',
    );
    this.awaySince = undefined;
  }

  private async sweepOf(claims: DeadlineClaims, settle: (member: string) => Promise<void>, now: number): Promise<{ count: number; next: number | undefined }> {
    const limit = this.d.batch ?? 200;
    let count = 0;
    for (;;) {
      const { members, next } = await this.claim(claims, now, limit);
      count += members.length;
      await Promise.all(members.map(settle));
      if (members.length < limit) return { count, next };
    }
  }

  private async expire(member: string, now: number): Promise<void> {
    const parsed = parseDeadlineMember(member);
    if (!parsed) {
      await this.d.claims.done([member]);
      return;
    }
    const { agent, seq } = parsed;
    const taken = await this.d.buffer.takeExpired(agent, seq);
    if (taken === undefined) {
      await this.d.claims.done([member]); // answered in time (or its buffer expired)
      return;
    }
    this.d.promoted(taken.promotions);
    const entry = taken.entry;
    const head = parseHead(headOf(entry));
    let records: OutRecord[];
    try {
      if (!head) throw new Error('unreadable buffer entry');
      const envelope = envelopeOfEntry(entry);
      const deadline = new Date(now).toISOString();
      // Pulled forward because the agent's socket died and it did not come back (gateway.ts).
      const lost = await this.d.buffer.lostAt(agent);
      ({ records } = await this.d.failures.records(
        {
          agent,
          envelope,
          head,
          ...(lost === undefined
            ? { code: ERROR.ACK_TIMEOUT, reason: `no ack from ${agent} for seq ${seq} by its deadline` }
            : lost.stoppedGracefully
              ? { code: ERROR.CONNECTION_CLOSED, reason: `${agent} stopped (closed with 1000) before it answered seq ${seq}`, handedBack: true }
              : { code: ERROR.CONNECTION_CLOSED, reason: `the connection of ${agent} closed before it acked seq ${seq}, and it did not reconnect in time` }),
          failureRetryable: true,
          detail: lost === undefined ? { seq, swept_at: deadline } : { seq, swept_at: deadline, lost_at: new Date(lost.at).toISOString() },
          seq,
        },
        Date.now(),
      ));
    } catch (err) {
      if (!head) {
        // Nothing can be done with it; keeping it would only fail again.
        this.d.log.error({ err, agent_id: agent, seq }, 'unreadable buffer entry past its deadline dropped');
        await this.d.claims.done([member]);
        return;
      }
      await this.d.buffer.restore(agent, seq, entry);
      throw err;
    }
    try {
      await produceAll(this.d.producer, records);
    } catch (err) {
      await this.d.buffer.restore(agent, seq, entry);
      throw err;
    }
    this.d.metrics.ackTimeouts.inc();
    await this.d.claims.done([member]);
  }

  private async expireWaiting(member: string, now: number): Promise<void> {
    const parsed = parseWaitMember(member);
    if (!parsed) {
      await this.d.waitClaims.done([member]);
      return;
    }
    const { agent, lane, order } = parsed;
    const taken = await this.d.buffer.takeWaiting(agent, lane, order);
    if (taken === undefined) {
      await this.d.waitClaims.done([member]); // promoted meanwhile
      return;
    }
    const waiting = parseWaitingEntry(taken);
    const head = waiting ? parseHead(waiting.head) : undefined;
    let records: OutRecord[];
    try {
      if (!waiting || !head) throw new Error('unreadable waiting entry');
      const waitedMs = Math.max(0, now - waiting.queuedAt);
      ({ records } = await this.d.failures.records(
        {
          agent,
          envelope: waiting.envelope(),
          head,
          code: ERROR.SATURATED,
          reason: `waited ${waitedMs} ms in the ${LANES[lane]} lane for a free slot of ${agent} (max_concurrency) until its time ran out`,
          failureRetryable: true,
          detail: { lane: LANES[lane], waited_ms: waitedMs },
        },
        Date.now(),
      ));
    } catch (err) {
      if (!waiting || !head) {
        this.d.log.error({ err, agent_id: agent, lane: LANES[lane] }, 'unreadable waiting entry past its deadline dropped');
        await this.d.waitClaims.done([member]);
        return;
      }
      await this.d.buffer.restoreWaiting(agent, lane, order, taken);
      throw err;
    }
    try {
      await produceAll(this.d.producer, records);
    } catch (err) {
      await this.d.buffer.restoreWaiting(agent, lane, order, taken);
      throw err;
    }
    this.d.metrics.waitExpired.inc({ priority: LANES[lane] });
    await this.d.waitClaims.done([member]);
  }
}
