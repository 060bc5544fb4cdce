import type { Logger } from '@reach/core';
import type { MessageRow } from './read-model.js';
import { DEFAULT_POLL_BACKOFF, isSettled, nextPollDelay, type PollBackoff } from './wait-policy.js';

export interface WaitOutcome {
  /** The message as last seen (undefined when the read model never had it). */
  readonly row: MessageRow | undefined;
  /** True when the wait ended because its time ran out rather than on a result or failure. */
  readonly timedOut: boolean;
}

interface Waiter {
  readonly messageId: string;
  readonly deadline: number;
  readonly resolve: (o: WaitOutcome) => void;
  delay: number;
  nextAt: number;
  last: MessageRow | undefined;
}

/**
 * Waits for handlers' results (`POST /v1/messages?wait_ms=`, R-C9) by polling the read
 * model the tracker writes. All waiters share one poller: each tick reads every due message in
 * one query, and each waiter's interval grows from a few ms (fast handlers answer quickly) to a
 * cap, so a thousand waiting requests cost a handful of queries a second, and nothing ever
 * blocks the event loop. A failed query only delays the next look.
 */
/** How far ahead of its time a waiter may be polled together with one that is due. */
const COALESCE_MS = 5;

export class ResultWaiter {
  private readonly waiters = new Set<Waiter>();
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  private polling = false;
  private closed = false;

  constructor(
    private readonly fetch: (messageIds: readonly string[]) => Promise<Map<string, MessageRow>>,
    private readonly log: Logger,
    private readonly backoff: PollBackoff = DEFAULT_POLL_BACKOFF,
  ) {}

  wait(messageId: string, timeoutMs: number, now: number = Date.now()): Promise<WaitOutcome> {
    if (this.closed) return Promise.resolve({ row: undefined, timedOut: true });
    return new Promise<WaitOutcome>((resolve) => {
      const delay = nextPollDelay(undefined, this.backoff);
      const deadline = now + timeoutMs;
      this.waiters.add({ messageId, deadline, resolve, delay, nextAt: Math.min(now + delay, deadline), last: undefined });
      this.schedule();
    });
  }

  get pending(): number {
    return this.waiters.size;
  }

  /** Ends every wait as timed out (shutdown). */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    for (const w of this.waiters) w.resolve({ row: w.last, timedOut: true });
    this.waiters.clear();
  }

  private schedule(): void {
    if (this.polling || this.closed || this.waiters.size === 0) return;
    let next = Number.POSITIVE_INFINITY;
    for (const w of this.waiters) next = Math.min(next, w.nextAt);
    if (this.timer && next >= this.timerAt) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = next;
    this.timer = setTimeout(() => void this.tick(), Math.max(0, next - Date.now()));
  }

  private async tick(): Promise<void> {
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    this.polling = true;
    try {
      const now = Date.now();
      // Waiters due within the next few ms ride along: otherwise two waits started a
      // millisecond apart would stay out of phase and cost a query each, forever.
      const due = [...this.waiters].filter((w) => w.nextAt <= now + COALESCE_MS);
      let rows: Map<string, MessageRow> | undefined;
      if (due.length > 0) {
        try {
          rows = await this.fetch([...new Set(due.map((w) => w.messageId))]);
        } catch (err) {
          this.log.warn({ err, waiting: this.waiters.size }, 'result wait: read model query failed; trying again');
        }
      }
      const after = Date.now();
      for (const w of due) {
        if (!this.waiters.has(w)) continue;
        const row = rows?.get(w.messageId) ?? w.last;
        w.last = row;
        if (isSettled(row)) this.finish(w, { row, timedOut: false });
        else if (after >= w.deadline) this.finish(w, { row, timedOut: true });
        else {
          w.delay = nextPollDelay(w.delay, this.backoff);
          // The last look is at the deadline itself, so a result that lands just in time counts.
          w.nextAt = Math.min(after + w.delay, w.deadline);
        }
      }
    } finally {
      this.polling = false;
      this.schedule();
    }
  }

  private finish(w: Waiter, outcome: WaitOutcome): void {
    this.waiters.delete(w);
    w.resolve(outcome);
  }
}
