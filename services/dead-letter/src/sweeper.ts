import { ERROR, type Logger } from '@reach/core';
import type { AlertInput } from '@reach/service-kit';
import type { DeadLetterMetrics } from './metrics.js';
import type { DeadLetterStore } from './store.js';

export const SWEEP_INTERVAL_MS = 60_000;
/** After a failed sweep (PostgreSQL restarting, a lock timeout): try again this soon, not a minute later. */
export const SWEEP_RETRY_MS = 5_000;

/**
 * The sweep (R-D11, R-B10), at start and every minute (sooner again after a failure): parked NO_ROUTE messages whose
 * expire_at passed become DEAD (EXPIRED); PARKED entries older than REACH_DLQ_STALE_AFTER_S
 * with no consumer become DEAD and raise an alert: one DEAD_LETTER_STALE event per sweep on
 * reach.alerts.v1 (and its error log line), a warn line per entry, and
 * reach_dead_letter_stale_total. Safe on several instances: each row changes state once.
 */
export class Sweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly store: DeadLetterStore,
    private readonly staleAfterS: number,
    private readonly metrics: DeadLetterMetrics,
    private readonly log: Logger,
    /** Publishes an operator alert; a failure is logged by the caller and costs only the event. */
    private readonly alert: (input: AlertInput) => Promise<void> = async () => undefined,
  ) {}

  start(): void {
    this.stopped = false;
    this.next(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One sweep after `delayMs`, then the next one: a minute on, or SWEEP_RETRY_MS after a failure. */
  private next(delayMs: number): void {
    this.timer = setTimeout(() => {
      this.running = this.sweep().then((r) => {
        if (!this.stopped) this.next(r.failed ? SWEEP_RETRY_MS : SWEEP_INTERVAL_MS);
      });
    }, delayMs);
    this.timer.unref();
  }

  async sweep(): Promise<{ expired: number; stale: number; failed?: true }> {
    try {
      const at = new Date().toISOString();
      const expired = await this.store.expireParked({ event: 'DEAD', at, why: 'EXPIRED', code: ERROR.EXPIRED });
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
      if (stale.length > 0) {
        const first = stale[0]!;
        await this.alert({
          kind: 'DEAD_LETTER_STALE',
          severity: 'P2',
          service: 'dead-letter',
          summary: `${stale.length} dead letter(s) parked for more than ${this.staleAfterS} s with no consumer are now DEAD (e.g. ${first.dlq_id}, reason ${first.reason}); inspect with \`reach dlq list --reason ${first.reason}\` and replay or purge`,
          message_id: first.message_id,
          trace_id: first.trace_id,
          capability: first.capability,
          labels: {
            count: String(stale.length),
            dlq_ids: stale
              .slice(0, 20)
              .map((r) => r.dlq_id)
              .join(','),
          },
        }).catch((err: unknown) => this.log.error({ err }, 'could not publish the DEAD_LETTER_STALE alert'));
      }
      return { expired: expired.length, stale: stale.length };
    } catch (err) {
      this.log.warn({ err, retry_in_ms: SWEEP_RETRY_MS }, 'dead-letter sweep failed; retried shortly');
      return { expired: 0, stale: 0, failed: true };
    }
  }
}
