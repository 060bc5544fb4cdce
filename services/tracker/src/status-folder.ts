import { NonRetryableError, ReachError, toReachError, type Logger } from '@reach/core';
import type { SchemaCodec, StatusEvent } from '@reach/envelope';
import { TOPICS, valueSubject, type InRecord, type OutRecord } from '@reach/kafka';
import { deadLetterRecord } from '@reach/service-kit';
import { foldBatch, idsWithoutCreatedAt, unusable } from './fold.js';
import type { TrackerMetrics } from './metrics.js';
import { isDataError, type ReadModelWriter } from './writer.js';

const STATUS_SUBJECT = valueSubject(TOPICS.status.name);

interface Item {
  readonly record: InRecord;
  readonly event: StatusEvent;
}

/**
 * Handles one batch of reach.status.v1 records: decode, fold, one write; returns DLQ entries
 * for records that can never be stored. The batch stage commits the offsets only after this
 * returns, i.e. after PostgreSQL has committed the rows.
 */
export class StatusFolder {
  constructor(
    private readonly codec: SchemaCodec,
    private readonly writer: ReadModelWriter,
    private readonly metrics: TrackerMetrics,
    private readonly log: Logger,
    private readonly service: string,
  ) {}

  async handle(records: readonly InRecord[]): Promise<OutRecord[]> {
    const out: OutRecord[] = [];
    const items: Item[] = [];
    for (const record of records) {
      try {
        const event = await this.codec.decode<StatusEvent>(STATUS_SUBJECT, record.value);
        const why = unusable(event);
        if (why) out.push(this.poison(record, new NonRetryableError('INVALID_ENVELOPE', `status event cannot be stored: ${why}`)));
        else items.push({ record, event });
      } catch (err) {
        const error = toReachError(err);
        // Registry unreachable: the record is fine, retry the batch later.
        if (error.retryable && error.codeName !== 'INTERNAL') throw error;
        out.push(this.poison(record, error));
      }
    }
    await this.write(items, out);
    return out;
  }

  /**
   * Writes the items in one statement. When PostgreSQL refuses the rows themselves (a value it
   * cannot store), the batch is halved until the offending record is alone; it goes to the DLQ
   * and everything else is written: one bad event never blocks the partition.
   */
  private async write(items: readonly Item[], out: OutRecord[]): Promise<void> {
    if (items.length === 0) return;
    const events = items.map((i) => i.event);
    const started = performance.now();
    try {
      const missing = idsWithoutCreatedAt(events);
      const known = missing.length > 0 ? await this.writer.knownCreatedAt(missing) : undefined;
      const result = await this.writer.write(foldBatch(events, known));
      this.metrics.written(events.length, (performance.now() - started) / 1000, result);
    } catch (err) {
      if (!isDataError(err)) {
        throw err instanceof ReachError ? err : new ReachError('DEPENDENCY_UNAVAILABLE', `read model write failed: ${(err as Error).message}`, { cause: err });
      }
      if (items.length === 1) {
        const item = items[0]!;
        this.log.error({ err, message_id: item.event.message_id, trace_id: item.event.trace_id }, 'status event refused by PostgreSQL; sent to the DLQ');
        out.push(this.poison(item.record, new NonRetryableError('INVALID_ENVELOPE', `status event refused by PostgreSQL: ${(err as Error).message}`)));
        return;
      }
      const half = Math.ceil(items.length / 2);
      await this.write(items.slice(0, half), out);
      await this.write(items.slice(half), out);
    }
  }

  private poison(record: InRecord, error: ReachError): OutRecord {
    this.metrics.unusable();
    return deadLetterRecord(this.codec, { service: this.service, error, record });
  }
}
