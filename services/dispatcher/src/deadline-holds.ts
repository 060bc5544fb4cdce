import type { Logger } from '@reach/core';
import { createdAtMs, headOf, parseHead, type EntryHead } from './entry.js';
import type { ReplayBuffer } from './replay-buffer.js';

/**
 * Ack deadlines held while their deliveries cannot go out yet.
 *
 * A routed delivery is stored with the deadline the router set (routing time + ack window),
 * then its DELIVERING event is produced, and only then is it sent (no ack may overtake its
 * DELIVERING). When Kafka is slow or down meanwhile — a broker restart takes 10–25 s, and the
 * batch may fail and be consumed again after it — the deadline would pass before the agent even
 * got the delivery: the sweeper retried it on another agent while the first agent ran it too
 * (the task done twice, or DEAD although acked: `pnpm chaos --faults kill-kafka`).
 *
 * So a batch's deliveries are held from the moment they are stored until they are sent: every
 * HOLD_EVERY_MS their deadlines are pushed to now + window (within the budget; never earlier:
 * ZADD GT), and once more just before they are sent when the produce was slow. A hold outlives a failed
 * batch (its records are consumed again and take the hold over) but not HOLD_MAX_MS, nor the
 * process: a dispatcher killed meanwhile holds nothing, its deadlines pass, and the sweeper
 * recovers the deliveries as before.
 */
export const HOLD_EVERY_MS = 2_000;
/** A hold ends at the latest this long after it began (or at the delivery's budget). */
export const HOLD_MAX_MS = 60_000;
/**
 * A delivery is not sent with less of its budget left than this (or than a quarter of its whole
 * budget, for short budgets): the answer could not come back before the budget's end.
 */
export const MIN_SEND_BUDGET_MS = 1_000;

/** A delivery whose budget (if any) ends within MIN_SEND_BUDGET_MS of `now` (a quarter of a short budget) is not sent. */
export function tooLateToSend(budgetAt: number | null, createdAt: number, now: number): boolean {
  if (budgetAt === null) return false;
  const margin = Number.isFinite(createdAt) ? Math.min(MIN_SEND_BUDGET_MS, (budgetAt - createdAt) / 4) : MIN_SEND_BUDGET_MS;
  return budgetAt - margin <= now;
}

/**
 * tooLateToSend for a buffered entry, read from its head: what a pump, a replay or a promotion
 * checks before it sends (an unreadable head is sent: the agent's answer settles it).
 */
export function entryTooLateToSend(entry: string, now: number): boolean {
  const head = parseHead(headOf(entry));
  return head !== undefined && headTooLateToSend(head, now);
}

/** tooLateToSend for an entry's head already parsed. */
export function headTooLateToSend(head: EntryHead, now: number): boolean {
  return tooLateToSend(head.budget_at ?? null, createdAtMs(head.message), now);
}

export interface HeldDelivery {
  agent: string;
  seq: number;
  windowMs: number;
  /** The message's time budget end; the deadline is never held past it. */
  budgetAt: number | null;
}

/** An ack deadline of a whole window from `now`, never past the budget. */
export function windowEnd(now: number, windowMs: number, budgetAt: number | null): number {
  return budgetAt === null ? now + windowMs : Math.min(now + windowMs, budgetAt);
}

/** The deadline a hold sets at `now`. */
export function heldUntil(h: HeldDelivery, now: number): number {
  return windowEnd(now, h.windowMs, h.budgetAt);
}

export class DeadlineHolds {
  private readonly held = new Map<string, { delivery: HeldDelivery; endsAt: number }>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly buffer: ReplayBuffer,
    private readonly log: Logger,
  ) {
    this.timer = setInterval(() => void this.tick(), HOLD_EVERY_MS);
    this.timer.unref();
  }

  begin(deliveries: readonly HeldDelivery[], now: number = Date.now()): void {
    for (const d of deliveries) this.held.set(`${d.agent}\n${d.seq}`, { delivery: d, endsAt: Math.min(now + HOLD_MAX_MS, d.budgetAt ?? Infinity) });
  }

  /** Pushes these deadlines now (a failure is logged: the deadline then runs as routed). */
  async renew(deliveries: readonly HeldDelivery[], now: number = Date.now()): Promise<void> {
    if (deliveries.length === 0) return;
    try {
      await this.buffer.holdDeadlines(deliveries.map((d) => ({ agent: d.agent, seq: d.seq, until: heldUntil(d, now) })));
    } catch (err) {
      this.log.warn({ err, count: deliveries.length }, 'could not hold ack deadlines of deliveries not sent yet');
    }
  }

  end(deliveries: readonly HeldDelivery[]): void {
    for (const d of deliveries) this.held.delete(`${d.agent}\n${d.seq}`);
  }

  get size(): number {
    return this.held.size;
  }

  private async tick(now: number = Date.now()): Promise<void> {
    if (this.held.size === 0) return;
    const live: HeldDelivery[] = [];
    for (const [key, h] of this.held) {
      if (h.endsAt <= now) this.held.delete(key);
      else live.push(h.delivery);
    }
    await this.renew(live, now);
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
