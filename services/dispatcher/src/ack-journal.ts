import type { Logger } from '@reach/core';
import { produceAll, type OutRecord, type Producer } from '@reach/kafka';
import { PeriodicJob } from '@reach/service-kit';
import { DeadlineClaims } from './deadlines.js';
import { parseHead } from './entry.js';
import type { Outcomes } from './outcomes.js';
import { keys, type ReplayBuffer } from './replay-buffer.js';

/** How often each instance looks for journaled acks whose DELIVERED was not written. */
export const ACK_JOURNAL_SWEEP_MS = 1_000;
/** An ack is only re-produced once it is this old: before that its own produce is still going. */
export const ACK_SETTLE_GRACE_MS = 5_000;
/** Clocks of hosts differ; an ack settled this close to its budget's end counts as late. */
const LATE_SLACK_MS = 2_000;

/**
 * Is an ack settled at `now` late for its message's budget (`budget_at` of its head)? Its
 * DELIVERED was then appended after (or near) the deadline, where the stuck sweep's read-model
 * watermark does not reach, so it is remembered (ReplayBuffer.settleAck).
 */
export function settlesLate(budgetAt: number | null | undefined, now: number = Date.now()): boolean {
  return budgetAt !== null && budgetAt !== undefined && now >= budgetAt - LATE_SLACK_MS;
}

/** A claimed ack not settled within this lease is claimed again (e.g. the claimer died). */
const CLAIM_LEASE_MS = 30_000;
const BATCH = 200;

/**
 * Makes every ack the dispatcher took end DELIVERED, whatever happens between the take and the
 * produce (R-D6: an ack is never lost). The take script journals each ack with its head and
 * time (replay-buffer.ts `acked`); the ack path removes it once DELIVERED is written. What is
 * still there after ACK_SETTLE_GRACE_MS — Kafka was away for longer than the producer's
 * retries, or the instance died between the take and the produce — is produced here, with the
 * original ack time, by whichever instance claims it first. A duplicate DELIVERED (the first
 * produce succeeded but its settle did not) is harmless: the tracker skips a state it has.
 */
export class AckJournal {
  private readonly job: PeriodicJob;
  private readonly claims: DeadlineClaims;

  constructor(
    private readonly d: { redis: ConstructorParameters<typeof DeadlineClaims>[0]; buffer: ReplayBuffer; outcomes: Outcomes; producer: Producer; log: Logger },
    intervalMs = ACK_JOURNAL_SWEEP_MS,
  ) {
    this.claims = new DeadlineClaims(d.redis, CLAIM_LEASE_MS, keys.ackedAt);
    this.job = new PeriodicJob('ack journal', intervalMs, () => this.sweep(), d.log);
  }

  start(): void {
    this.job.start();
  }

  stop(): Promise<void> {
    return this.job.stop();
  }

  /** One round: produces the DELIVERED events of acks older than the grace; returns how many. */
  async sweep(now: number = Date.now()): Promise<number> {
    let total = 0;
    for (;;) {
      const ids = await this.claims.claim(now - ACK_SETTLE_GRACE_MS, BATCH);
      if (ids.length === 0) return total;
      const acks = await this.d.buffer.journaledAcks(ids);
      const records: OutRecord[] = [];
      const budgets = new Map<string, number | null | undefined>();
      acks.forEach((a, i) => {
        // Gone: its own produce finished after the claim and settled it (a slow produce while
        // the broker restarted) — its DELIVERED is written, nothing to do.
        if (!a) return;
        const head = parseHead(a.head);
        if (head) {
          records.push(...this.d.outcomes.journaled(a.agent, a.seq, head, a.ackedAt));
          budgets.set(ids[i]!, head.budget_at);
        } else this.d.log.error({ message_id: ids[i] }, 'unreadable ack journal entry dropped');
      });
      await produceAll(this.d.producer, records);
      const settled = Date.now();
      await Promise.all(ids.map((id) => this.d.buffer.settleAck(id, settlesLate(budgets.get(id), settled)))); // one write for all of them
      if (records.length > 0) this.d.log.warn({ count: records.length }, 'acks whose DELIVERED had not been written were produced from the ack journal');
      total += ids.length;
      if (ids.length < BATCH) return total;
    }
  }
}
