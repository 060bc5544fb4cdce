import type { Logger } from '@reach/core';
import type { Announcement } from './announcer.js';
import { headTooLateToSend } from './deadline-holds.js';
import { entryMessageId, headOf, parseHead } from './entry.js';
import { LANES } from './lanes.js';
import type { DispatcherMetrics } from './metrics.js';
import type { Promotion } from './replay-buffer.js';
import type { SentLedger } from './sent-ledger.js';

export interface PromoterDeps {
  /** Where the lane and wait of a promoted delivery are noted for its DELIVERING event. */
  ledger: Pick<SentLedger, 'note'>;
  metrics: DispatcherMetrics;
  log: Logger;
  announce(items: readonly Announcement[]): Promise<void>;
}

/**
 * Waiting deliveries that got a slot (replay-buffer.ts): each is counted, and sent like a fresh
 * delivery. Its second DELIVERING event (the first one, when it was consumed, said which lane
 * it waits in) comes when it is sent, with its seq and ack deadline (sent-ledger.ts) and, when
 * this instance sends it, the lane it waited in and for how long (noted here). Whoever freed
 * the slot — an ack, a reject, a missed ack deadline, on whichever instance — hands the
 * promotions here.
 */
export class Promoter {
  constructor(private readonly d: PromoterDeps) {}

  /** Counts the promotions and their wait. */
  private count(promotions: readonly Promotion[], now: number): void {
    for (const p of promotions) {
      const lane = LANES[p.lane];
      this.d.metrics.promotions.inc({ priority: lane });
      this.d.metrics.waitSeconds.observe({ priority: lane }, Math.max(0, now - p.queuedAt) / 1000);
    }
  }

  private announcements(promotions: readonly Promotion[]): Announcement[] {
    return promotions.map((p) => {
      const traceId = /"trace_id":"([^"\\]*)"/.exec(headOf(p.entry))?.[1];
      return { agent: p.agent, seq: p.seq, entry: p.entry, messageId: entryMessageId(p.entry) ?? '', traceId };
    });
  }

  /**
   * Promotions outside the consume loop: counted, then the deliveries sent (their lane and wait
   * noted for their DELIVERING events) — but not one whose ack deadline has already passed, nor
   * one with too little of its budget left to be answered in it (tooLateToSend: it waited until its budget was nearly spent, and
   * the deadline never outlives the budget): the deadline sweeper fails it as it stands. Sent,
   * its agent would run a task whose sender is told DEAD (`pnpm chaos --long` under overload:
   * promoted 4 s past its deadline, then acked; promoted 71 ms before it, then acked).
   */
  handle(promotions: readonly Promotion[], now: number = Date.now()): void {
    if (promotions.length === 0) return;
    this.count(promotions, now);
    const heads = promotions.map((p) => parseHead(headOf(p.entry)));
    const live = promotions.filter((p, i) => p.deadline > now && !(heads[i] && headTooLateToSend(heads[i], now)));
    if (live.length < promotions.length)
      this.d.log.info(
        { agent_id: promotions[0]!.agent, count: promotions.length - live.length },
        'promoted too close to (or past) their budget: not sent, the deadline sweep ends them',
      );
    if (live.length === 0) return;
    for (const p of live) this.d.ledger.note(p.agent, p.seq, { lane: LANES[p.lane], waited_ms: Math.max(0, now - p.queuedAt) });
    this.d
      .announce(this.announcements(live))
      .catch((err: unknown) => this.d.log.warn({ err, agent_id: promotions[0]!.agent }, 'could not announce promoted deliveries; they stay buffered'));
  }
}
