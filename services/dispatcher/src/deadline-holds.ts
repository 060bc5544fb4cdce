import type { Logger } from '@reach/core';
import { budgetStartMs, entryDeadline, headOf, parseHead, type EntryHead } from './entry.js';
import type { ReplayBuffer } from './replay-buffer.js';

/**
 * Ack deadlines held while their deliveries cannot go out yet.
 *
 * A routed delivery is stored with the deadline the router set (routing time + ack window),
 * then announced (sent). A batch that fails after its append — Redis or the announcement
 * failing, its outputs not produced while Kafka restarts (10–25 s) — is consumed again, and its
 * stored deliveries keep the deadline of the first pass: it could pass before the agent even
 * got the delivery, and the sweeper retried it on another agent while the first agent ran it
 * too (the task done twice, or DEAD although acked: `pnpm chaos --faults kill-kafka`).
 *
 * So a batch's deliveries are held from the moment they are stored until they are sent: every
 * HOLD_EVERY_MS their deadlines are pushed to now + window (within the budget; never earlier:
 * ZADD GT), and once more just before they are sent when the batch came again. A hold ends at
 * HOLD_MAX_MS, and with the process: a dispatcher killed meanwhile holds nothing, its deadlines
 * pass, and the sweeper recovers the deliveries as before.
 */
export const HOLD_EVERY_MS = 2_000;
/** A hold ends at the latest this long after it began (or at the delivery's budget). */
export const HOLD_MAX_MS = 60_000;
/**
 * A delivery is not sent with less of its budget left than this (or than a quarter of its whole
 * budget, for short budgets): the answer could not come back before the budget's end.
 */
export const MIN_SEND_BUDGET_MS = 1_000;

/**
 * The budget a delivery must have left to be sent: MIN_SEND_BUDGET_MS, or twice the agent's
 * recent answer time when that is longer (`answerMs`, 0 when unknown) — on a saturated machine
 * an answer took longer than the second left, and the agent ran a task its sender was told is
 * DEAD (`pnpm chaos --long`: promoted with 1.1–2 s left, acked after the budget's end) — but
 * never more than a quarter of the whole budget.
 */
export function sendMarginMs(budgetAt: number, budgetStart: number, answerMs = 0): number {
  const wanted = Math.max(MIN_SEND_BUDGET_MS, 2 * answerMs);
  return Number.isFinite(budgetStart) ? Math.min(wanted, (budgetAt - budgetStart) / 4) : wanted;
}

/** A delivery whose budget (if any) ends within its send margin (sendMarginMs) of `now` is not sent. */
export function tooLateToSend(budgetAt: number | null, budgetStart: number, now: number, answerMs = 0): boolean {
  if (budgetAt === null) return false;
  return budgetAt - sendMarginMs(budgetAt, budgetStart, answerMs) <= now;
}

/**
 * tooLateToSend for a buffered entry, read from its head: what a pump, a replay or a promotion
 * checks before it sends (an unreadable head is sent: the agent's answer settles it).
 */
export function entryTooLateToSend(entry: string, now: number, answerMs = 0): boolean {
  const head = parseHead(headOf(entry));
  return head !== undefined && headTooLateToSend(head, now, answerMs);
}

/** tooLateToSend for an entry's head already parsed. */
export function headTooLateToSend(head: EntryHead, now: number, answerMs = 0): boolean {
  return tooLateToSend(head.budget_at ?? null, budgetStartMs(head.message), now, answerMs);
}

/**
 * An agent's recent answer time (send → ack/reject/result), quick to rise and slow to fall:
 * a machine that saturates should widen the send margin at once, a calm moment not reset it.
 */
export class AnswerTime {
  private estimateMs = 0;

  observe(ms: number): void {
    const w = ms > this.estimateMs ? 0.5 : 0.1;
    this.estimateMs += w * (ms - this.estimateMs);
  }

  get ms(): number {
    return this.estimateMs;
  }

  /** Does the answer time widen the send margin beyond MIN_SEND_BUDGET_MS? */
  get widensMargin(): boolean {
    return 2 * this.estimateMs > MIN_SEND_BUDGET_MS;
  }
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

/** An entry sent this much later than its ack deadline was set gets its window from the send. */
export const RENEW_AT_SEND_AFTER_MS = 1_000;

/**
 * The ack deadline an entry should get as it goes out at `now`, when it sat in the buffer for
 * more than RENEW_AT_SEND_AFTER_MS since its deadline was set (its window counted from now,
 * within its budget); undefined when its deadline is fresh, or the entry unreadable.
 *
 * A connection sends its agent's entries in seq order, at the pace the agent reads. An entry
 * behind others that could not go out — a replay, a backlog the agent was slow to read — with a
 * deadline set at its append or promotion and no hold (holds cover routed batches) went out
 * with its deadline nearly gone: swept 3002 while its agent ran it, it ran again on another
 * agent (`pnpm chaos --faults kill-kafka,kill-dispatcher --rate 500`: one task run twice, when
 * entries still waited for their DELIVERING event to be produced before they were sent).
 */
export function renewedAtSend(entry: string, now: number, defaultWindowMs: number): number | undefined {
  const deadline = entryDeadline(entry);
  const head = parseHead(headOf(entry));
  if (deadline === undefined || !head) return undefined;
  const window = ackWindowOf(head, defaultWindowMs);
  if (deadline - now >= window - RENEW_AT_SEND_AFTER_MS) return undefined;
  return windowEnd(now, window, head.budget_at ?? null);
}

/** A delivery's ack window: the message's own timeout, else the default. */
export function ackWindowOf(head: EntryHead, defaultWindowMs: number): number {
  const own = head.message.timeout_ms;
  return typeof own === 'number' && own > 0 ? own : defaultWindowMs;
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
