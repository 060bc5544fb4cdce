import type { Logger } from '@reach/core';
import type { DeadLetterMetrics } from './metrics.js';
import type { DeadLetterStore } from './store.js';

export const SWEEP_INTERVAL_MS = 60_000;

/**
 * The sweep (SPEC R-D11, R-B10), at start and every minute: parked NO_ROUTE messages whose
 * expire_at passed become DEAD (EXPIRED); PARKED entries older than REACH_DLQ_STALE_AFTER_S
 * with no consumer become DEAD and raise an alert (a warn log line per entry and
 * reach_dead_letter_stale_total). Safe on several instances: each row changes state once.
 */
export class Sweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly store: DeadLetterStore,
    private readonly staleAfterS: number,
    private readonly metrics: DeadLetterMetrics,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.running = this.sweep();
    this.timer = setInterval(() => {
      this.running = this.running.then(() => this.sweep());
    }, SWEEP_INTERVAL_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  async sweep(): Promise<{ expired: number; stale: number }> {
    try {
      const at = new Date().toISOString();
      const expired = await this.store.expireParked({ event: 'DEAD', at, why: 'EXPIRED', code: 3006 });
      for (const r of expired) {
        this.log.info({ dlq_id: r.dlq_id, message_id: r.message_id, trace_id: r.trace_id, capability: r.capability }, 'parked message expired; now DEAD');
      }
      this.metrics.expiredRows(expired.length);
      const stale = await this.store.sweepStale(this.staleAfterS, { event: 'DEAD', at, why: 'STALE', stale_after_s: this.staleAfterS });
      for (const r of stale) {
        this.log.warn(
          {
            alert: 'DEAD_LETTER_STALE',
            dlq_id: r.dlq_id,
            message_id: r.message_id,
            trace_id: r.trace_id,
            reason: r.reason,
            capability: r.capability,
            parked_since: r.created_at,
            stale_after_s: this.staleAfterS,
          },
          `ALERT: dead letter parked for more than ${this.staleAfterS} s with no consumer; marked DEAD`,
        );
      }
      this.metrics.staleRows(stale.length);
      return { expired: expired.length, stale: stale.length };
    } catch (err) {
      this.log.warn({ err }, 'dead-letter sweep failed; retried in a minute');
      return { expired: 0, stale: 0 };
    }
  }
}
