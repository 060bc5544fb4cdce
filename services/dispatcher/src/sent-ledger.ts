import type { Logger } from '@reach/core';
import type { OutRecord } from '@reach/kafka';
import { deliveringOfEntry, type EventSource } from './delivering.js';
import { entryDeadline } from './entry.js';
import type { DispatcherMetrics } from './metrics.js';
import type { Outbox } from './outbox.js';

/**
 * The deliveries this instance sent (a deliver frame written to a socket, an HTTP or A2A push
 * made) whose DELIVERING event is not produced yet — the send path itself produces nothing
 * (routed-consumer.ts). Key (agent, seq); kept with the time it was sent, which is the event's
 * `at`. The event goes out
 *
 *   - with the delivery's outcome, when this instance produces it (an ack or result:
 *     outcomes.ts and the ack journal; a reject, a missed ack deadline, a lost connection:
 *     failures.ts): `take` hands it over, prepended to the outcome's records, so both are
 *     written in the same produce, DELIVERING first;
 *   - alone, for a delivery still unanswered DELIVERING_ALONE_AFTER_MS after it was sent: one
 *     timer, set for the oldest entry's due time.
 *
 * Each is produced once per (agent, seq) on this instance: an entry leaves the ledger when its
 * event is handed over. A send of a delivery already in the ledger (sent twice before its event
 * went) keeps the first send's time; a send after that (a replay after a reconnect) is a new
 * send and gets an event of its own. An instance that dies takes its ledger with it: the
 * delivery's outcome then comes without a DELIVERING — legal, states may be skipped, never go
 * back (the tracker folds only forward; chaos verify orders a message's events by `at`).
 */
export const DELIVERING_ALONE_AFTER_MS = 250;
/** A produce of events alone that failed (Kafka away) is tried again after this long. */
const RETRY_MS = 1_000;
/** Bound of the ledger (and of the events waiting to be tried again): beyond it the oldest go out at once. */
const MAX_ENTRIES = 100_000;
/** Bound of the notes; a note older than this is dropped (its delivery was sent elsewhere, or never). */
const MAX_NOTES = 10_000;
const NOTE_TTL_MS = 60_000;

interface Sent {
  agent: string;
  seq: number;
  entry: string;
  sentAt: number;
  due: number;
  /** More of the event's detail (a promoted delivery's lane and wait: note). */
  extra?: Record<string, unknown> | undefined;
  /** The event, once built (an event handed back after its produce failed). */
  record?: OutRecord | undefined;
}

export interface SentLedgerDeps extends EventSource {
  outbox: Pick<Outbox, 'send'>;
  log: Logger;
  metrics?: Pick<DispatcherMetrics, 'deliveringEvents'>;
  /** Default DELIVERING_ALONE_AFTER_MS. */
  aloneAfterMs?: number;
  now?: () => number;
}

function keyOf(agent: string, seq: number): string {
  return `${agent}|${seq}`;
}

export class SentLedger {
  /** In the order they were sent, so in the order they fall due. */
  private readonly sent = new Map<string, Sent>();
  /** Events whose produce failed, to be tried again. */
  private again: Sent[] = [];
  private readonly notes = new Map<string, { extra: Record<string, unknown>; at: number }>();
  private timer: NodeJS.Timeout | undefined;
  private timerDue = Infinity;
  private stopped = false;
  private readonly aloneAfterMs: number;
  private readonly now: () => number;

  constructor(private readonly d: SentLedgerDeps) {
    this.aloneAfterMs = d.aloneAfterMs ?? DELIVERING_ALONE_AFTER_MS;
    this.now = d.now ?? Date.now;
  }

  /** Entries waiting for their event (for tests and metrics). */
  get size(): number {
    return this.sent.size + this.again.length;
  }

  /**
   * More detail for the DELIVERING event of (agent, seq) when this instance sends it: a
   * promoted delivery's lane and how long it waited (promotions.ts).
   */
  note(agent: string, seq: number, extra: Record<string, unknown>): void {
    const now = this.now();
    if (this.notes.size >= MAX_NOTES) {
      for (const [k, n] of this.notes) {
        if (this.notes.size < MAX_NOTES && now - n.at < NOTE_TTL_MS) break;
        this.notes.delete(k);
      }
    }
    this.notes.set(keyOf(agent, seq), { extra, at: now });
  }

  /** A delivery was sent (a deliver frame written, a push made): its `entry` as buffered. */
  record(agent: string, seq: number, entry: string, sentAt: number = this.now()): void {
    if (this.stopped) return;
    const key = keyOf(agent, seq);
    if (this.sent.has(key)) return; // sent again before its event went: the first send's time
    const note = this.notes.get(key);
    if (note) this.notes.delete(key);
    if (this.sent.size >= MAX_ENTRIES) this.produceAlone(this.sent.size - MAX_ENTRIES + 1);
    this.sent.set(key, { agent, seq, entry, sentAt, due: sentAt + this.aloneAfterMs, extra: note?.extra });
    this.arm(sentAt + this.aloneAfterMs);
  }

  /**
   * The DELIVERING event of (agent, seq) if it is not produced yet (none otherwise), for the
   * caller to produce before the delivery's outcome, in the same produce. The entry leaves the
   * ledger; should that produce fail, `restore` hands the event back.
   */
  take(agent: string, seq: number): OutRecord[] {
    const key = keyOf(agent, seq);
    const s = this.sent.get(key);
    if (!s) return [];
    this.sent.delete(key);
    const record = this.eventOf(s);
    if (!record) return [];
    this.d.metrics?.deliveringEvents.inc({ with: 'outcome' });
    return [record];
  }

  /** Events `take` handed over whose produce failed: produced alone, soon. */
  restore(records: readonly OutRecord[]): void {
    if (this.stopped || records.length === 0) return;
    const due = this.now() + RETRY_MS;
    for (const record of records) this.again.push({ agent: '', seq: 0, entry: '', sentAt: 0, due, record });
    this.trimAgain();
    this.arm(due);
  }

  /** Produces every event still waiting (shutdown: before the outbox drains) and stops the timer. */
  async flush(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const items = [...this.again, ...this.sent.values()];
    this.again = [];
    this.sent.clear();
    const records = items.flatMap((s) => this.eventOf(s) ?? []);
    if (records.length === 0) return;
    await this.d.outbox
      .send(records)
      .catch((err: unknown) => this.d.log.warn({ err, count: records.length }, 'could not produce DELIVERING events at shutdown'));
  }

  private eventOf(s: Sent): OutRecord | undefined {
    if (s.record) return s.record;
    const deadlineMs = entryDeadline(s.entry);
    const deadline = deadlineMs === undefined ? undefined : new Date(deadlineMs).toISOString();
    const record = deliveringOfEntry(this.d, s.agent, s.entry, { seq: s.seq, deadline, instance: this.d.instance, ...s.extra }, s.sentAt);
    if (!record) this.d.log.error({ agent_id: s.agent, seq: s.seq }, 'unreadable entry sent; no DELIVERING event');
    return record;
  }

  /** Sets the one timer for `due` unless it is set for earlier already. */
  private arm(due: number): void {
    if (this.stopped || (this.timer && this.timerDue <= due)) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerDue = due;
    this.timer = setTimeout(() => this.fire(), Math.max(0, due - this.now()));
    this.timer.unref();
  }

  private fire(): void {
    this.timer = undefined;
    this.timerDue = Infinity;
    const now = this.now();
    let count = 0;
    for (const s of this.sent.values()) {
      if (s.due > now) break;
      count++;
    }
    this.produceAlone(count, now);
    let next = this.sent.values().next().value?.due ?? Infinity;
    for (const s of this.again) next = Math.min(next, s.due);
    if (next !== Infinity) this.arm(next);
  }

  /** Produces the events of the `count` oldest entries, and of the failed ones due again. */
  private produceAlone(count: number, now: number = this.now()): void {
    const items: Sent[] = [];
    for (const [key, s] of this.sent) {
      if (items.length >= count) break;
      this.sent.delete(key);
      items.push(s);
    }
    const retried = this.again.filter((s) => s.due <= now);
    if (retried.length > 0) this.again = this.again.filter((s) => s.due > now);
    const built = [...retried, ...items].flatMap((s) => {
      const record = this.eventOf(s);
      return record ? [{ ...s, record }] : [];
    });
    if (built.length === 0) return;
    this.d.metrics?.deliveringEvents.inc({ with: 'alone' }, built.length);
    this.d.outbox.send(built.map((s) => s.record)).catch((err: unknown) => {
      this.d.log.warn({ err, count: built.length }, 'could not produce DELIVERING events; tried again');
      if (this.stopped) return;
      const due = this.now() + RETRY_MS;
      this.again.push(...built.map((s) => ({ ...s, due })));
      this.trimAgain();
      this.arm(due);
    });
  }

  private trimAgain(): void {
    if (this.again.length <= MAX_ENTRIES) return;
    const dropped = this.again.length - MAX_ENTRIES;
    this.again = this.again.slice(dropped);
    this.d.log.error({ count: dropped }, 'DELIVERING events dropped: too many waiting to be produced again');
  }
}
