import type { ServiceMetrics } from '@reach/service-kit';

type Counter = ReturnType<ServiceMetrics['counter']>;

/** reach_dead_letter_*: entries stored, replays, redrives, expired and stale entries. */
export class DeadLetterMetrics {
  private readonly stored: Counter;
  private readonly replays: Counter;
  private readonly redrives: Counter;
  private readonly expired: Counter;
  private readonly stale: Counter;
  private readonly purges: Counter;
  private readonly poisonRecords: ServiceMetrics['poisonRecords'];

  constructor(m: ServiceMetrics) {
    this.poisonRecords = m.poisonRecords;
    this.stored = m.counter('stored_total', 'Dead letters stored in PostgreSQL (each record once), by reason.', ['reason']);
    this.replays = m.counter('replays_total', 'Dead letters sent back through ingress, by cause (manual, bulk, redrive) and reason.', ['cause', 'reason']);
    this.redrives = m.counter('redrives_total', 'Parked NO_ROUTE messages redriven because a matching agent appeared (R-B10).');
    this.expired = m.counter('expired_total', 'Parked NO_ROUTE messages whose expire_at passed before an agent appeared (now DEAD, EXPIRED).');
    this.stale = m.counter('stale_total', 'PARKED dead letters older than REACH_DLQ_STALE_AFTER_S marked DEAD by the sweep (each one alerts).');
    this.purges = m.counter('purges_total', 'Dead letters purged by an admin.');
  }

  storedRows(reasons: readonly string[]): void {
    for (const reason of reasons) this.stored.inc({ reason });
  }

  replayed(cause: string, reason: string): void {
    this.replays.inc({ cause, reason });
    if (cause === 'redrive') this.redrives.inc();
  }

  expiredRows(n: number): void {
    if (n > 0) this.expired.inc(n);
  }

  staleRows(n: number): void {
    if (n > 0) this.stale.inc(n);
  }

  /** A record of `topic` that could not be stored as it came, and where it went instead. */
  poison(topic: string, parked: 'stored_raw' | 'stored_sanitized' | 'poison_topic'): void {
    this.poisonRecords.inc({ topic, parked });
  }

  purged(): void {
    this.purges.inc();
  }
}
