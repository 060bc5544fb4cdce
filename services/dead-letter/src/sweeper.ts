import type { Logger } from '@reach/core';
import type { AlertInput } from '@reach/service-kit';
import type { DeadLetterMetrics } from './metrics.js';
import type { DeadLetterStore } from './store.js';

export const SWEEP_INTERVAL_MS = 60_000;

/**
 * The sweep (SPEC R-D11, R-B10), at start and every minute: parked NO_ROUTE messages whose
 * expire_at passed become DEAD (EXPIRED); PARKED entries older than REACH_DLQ_STALE_AFTER_S
 * with no consumer become DEAD and raise an alert: one DEAD_LETTER_STALE event per sweep on
 * reach.alerts.v1 (and its error log line), a warn line per entry, and
 * reach_dead_letter_stale_total. Safe on several instances: each row changes state once.
 */
export class Sweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly store: DeadLetterStore,
    private readonly staleAfterS: number,
    private readonly metrics: DeadLetterMetrics,
    private readonly log: Logger,
    /** Publishes an operator alert; a failure is logged by the caller and costs only the event. */
    private readonly alert: (input: AlertInput) => Promise<void> = async () => undefined,
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
      this.log.warn({ err }, 'dead-letter sweep failed; retried in a minute');
      return { expired: 0, stale: 0 };
    }
  }
}
