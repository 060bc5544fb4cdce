import type { Logger } from '@reach/core';
import type { SchemaCodec } from '@reach/envelope';
import type { OutRecord } from '@reach/kafka';
import type { Announcement } from './announcer.js';
import { headTooLateToSend } from './deadline-holds.js';
import { entryMessageId, headOf, parseHead, type EntryHead } from './entry.js';
import { LANES } from './lanes.js';
import type { DispatcherMetrics } from './metrics.js';
import { deliveringOfHead } from './orphans.js';
import type { Outbox } from './outbox.js';
import type { Promotion } from './replay-buffer.js';

export interface PromoterDeps {
  codec: SchemaCodec;
  service: string;
  instance: string;
  outbox: Outbox;
  metrics: DispatcherMetrics;
  log: Logger;
  announce(items: readonly Announcement[]): Promise<void>;
}

/**
 * Waiting deliveries that got a slot (replay-buffer.ts): each gets a second DELIVERING event,
 * now with its seq and ack deadline (the first one, when it was consumed, said which lane it
 * waits in), is counted, and is sent like a fresh delivery. Whoever freed the slot — an ack, a
 * reject, a missed ack deadline, on whichever instance — hands the promotions here.
 */
export class Promoter {
  constructor(private readonly d: PromoterDeps) {}

  /**
   * The DELIVERING events of promoted deliveries, each head parsed once (`heads[i]` of
   * `promotions[i]`, undefined when unreadable); also counts them and their wait.
   */
  private records(promotions: readonly Promotion[], heads: ReadonlyArray<EntryHead | undefined>, now: number): OutRecord[] {
    const out: OutRecord[] = [];
    promotions.forEach((p, i) => {
      const lane = LANES[p.lane];
      this.d.metrics.promotions.inc({ priority: lane });
      this.d.metrics.waitSeconds.observe({ priority: lane }, Math.max(0, now - p.queuedAt) / 1000);
      const head = heads[i];
      if (!head) {
        this.d.log.error({ agent_id: p.agent, seq: p.seq }, 'unreadable promoted entry; sent without a DELIVERING event');
        return;
      }
      const detail = { seq: p.seq, deadline: new Date(p.deadline).toISOString(), instance: this.d.instance, lane, waited_ms: Math.max(0, now - p.queuedAt) };
      out.push(deliveringOfHead(this.d, p.agent, head, detail, now));
    });
    return out;
  }

  private announcements(promotions: readonly Promotion[]): Announcement[] {
    return promotions.map((p) => {
      const traceId = /"trace_id":"([^"\\]*)"/.exec(headOf(p.entry))?.[1];
      return { agent: p.agent, seq: p.seq, entry: p.entry, messageId: entryMessageId(p.entry) ?? '', traceId };
    });
  }

  /**
   * Promotions outside the consume loop: their events queued first, then the deliveries sent —
   * but not one whose ack deadline has already passed, nor one with too little of its budget
   * left to be answered in it (tooLateToSend: it waited until its budget was nearly spent, and
   * the deadline never outlives the budget): the deadline sweeper fails it as it stands. Sent,
   * its agent would run a task whose sender is told DEAD (`pnpm chaos --long` under overload:
   * promoted 4 s past its deadline, then acked; promoted 71 ms before it, then acked).
   */
  handle(promotions: readonly Promotion[], now: number = Date.now()): void {
    if (promotions.length === 0) return;
    const heads = promotions.map((p) => parseHead(headOf(p.entry)));
    this.d.outbox.post(this.records(promotions, heads, now), 'DELIVERING status of promoted deliveries', { agent_id: promotions[0]!.agent });
    const live = promotions.filter((p, i) => p.deadline > now && !(heads[i] && headTooLateToSend(heads[i], now)));
    if (live.length < promotions.length)
      this.d.log.info(
        { agent_id: promotions[0]!.agent, count: promotions.length - live.length },
        'promoted too close to (or past) their budget: not sent, the deadline sweep ends them',
      );
    if (live.length === 0) return;
    this.d
      .announce(this.announcements(live))
      .catch((err: unknown) => this.d.log.warn({ err, agent_id: promotions[0]!.agent }, 'could not announce promoted deliveries; they stay buffered'));
  }
}
