import type { Logger } from '@reach/core';
import { produceAll, type OutRecord, type Producer } from '@reach/kafka';

/**
 * Produces the records the dispatcher emits outside its consume loop — status events of acks,
 * rejects and results, presence changes, agents' `send`/`result` messages — through the one
 * long-lived producer, batched: while one request is in flight, everything queued meanwhile
 * goes out together in the next. Under load that is one request per round trip instead of one
 * per record (the idempotent producer keeps a single request in flight anyway); idle, a record
 * goes out at once. Records keep the order they were queued in.
 */
const MAX_RECORDS_PER_REQUEST = 2000;

interface Pending {
  records: readonly OutRecord[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class Outbox {
  private queue: Pending[] = [];
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly producer: Producer,
    private readonly log: Logger,
  ) {}

  /** Resolves once the records are written (acks=-1). */
  send(records: readonly OutRecord[]): Promise<void> {
    if (records.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ records, resolve, reject });
      this.flushing ??= this.flush();
    });
  }

  /** Queues records nobody waits for; a failure is logged with `what`. */
  post(records: readonly OutRecord[], what: string, fields: Record<string, unknown> = {}): void {
    this.send(records).catch((err: unknown) => this.log.error({ err, ...fields }, `could not produce ${what}`));
  }

  /** Resolves when everything queued so far has been written or has failed. */
  async drain(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async flush(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch: Pending[] = [];
        let count = 0;
        while (this.queue.length > 0 && (batch.length === 0 || count + this.queue[0]!.records.length <= MAX_RECORDS_PER_REQUEST)) {
          const next = this.queue.shift()!;
          batch.push(next);
          count += next.records.length;
        }
        try {
          await produceAll(
            this.producer,
            batch.flatMap((b) => b.records),
          );
          for (const b of batch) b.resolve();
        } catch (err) {
          for (const b of batch) b.reject(err);
        }
      }
    } finally {
      this.flushing = undefined;
    }
  }
}
