import { NonRetryableError, ReachError, toReachError, type Logger } from '@reach/core';
import type { SchemaCodec, StatusBatch, StatusEvent } from '@reach/envelope';
import { TOPICS, valueSubject, type InRecord, type OutRecord, GroupCommit } from '@reach/kafka';
import { deadLetterRecord } from '@reach/service-kit';
import { foldBatch, idsWithoutCreatedAt, unusable } from './fold.js';
import type { TrackerMetrics } from './metrics.js';
import type { ReadModelWriter } from './writer.js';
import { isDataError, storableJson, storableText, writeIsolatingRefused } from '@reach/store';

const STATUS_SUBJECT = valueSubject(TOPICS.status.name);
const BATCH_SUBJECT = valueSubject(TOPICS.statusBatches.name);

interface Item {
  readonly record: InRecord;
  readonly event: StatusEvent;
  /** The DLQ entries of the batch it came from (a refused event goes there). */
  readonly out: OutRecord[];
}

/**
 * Handles one batch of status records — StatusBatch records of reach.status-batches.v1 or single
 * events of reach.status.v1 — decode, fold, one write; returns DLQ entries for records that can
 * never be stored (a record that cannot be decoded goes whole; an unusable event of a batch
 * goes as a single event). The batch stage commits the offsets only after this
 * returns, i.e. after PostgreSQL has committed the rows. The batches of the partitions consumed
 * at once are written together (GroupCommit, packages/kafka).
 */
export class StatusFolder {
  private readonly commits = new GroupCommit<Item>((items) => this.write(items));

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
        const events =
          record.topic === TOPICS.statusBatches.name
            ? (await this.codec.decode<StatusBatch>(BATCH_SUBJECT, record.value)).events
            : [await this.codec.decode<StatusEvent>(STATUS_SUBJECT, record.value)];
        for (const event of events) {
          const why = unusable(event);
          if (why) out.push(this.poison(record, new NonRetryableError('INVALID_ENVELOPE', `status event cannot be stored: ${why}`), event));
          else items.push({ record, event, out });
        }
      } catch (err) {
        const error = toReachError(err);
        // Registry unreachable: the record is fine, retry the batch later.
        if (error.retryable && error.codeName !== 'INTERNAL') throw error;
        out.push(this.poison(record, error));
      }
    }
    if (items.length > 0) await this.commits.add(items);
    return out;
  }

  /**
   * Writes the items in one statement. When PostgreSQL refuses the rows themselves (a value it
   * cannot store), the batch is halved until the offending event is alone and everything else
   * is written: one bad event never blocks the partition. The refused event is written again
   * with its text made storable (storableEvent), so its state transition is never lost to its
   * content; only an event refused even then goes to the DLQ.
   */
  private async write(items: readonly Item[]): Promise<void> {
    try {
      await writeIsolatingRefused(
        items,
        (batch) => this.writeEvents(batch),
        (item, err) => this.refused(item, err),
      );
    } catch (err) {
      throw err instanceof ReachError ? err : new ReachError('DEPENDENCY_UNAVAILABLE', `read model write failed: ${(err as Error).message}`, { cause: err });
    }
  }

  private async writeEvents(items: readonly Item[]): Promise<void> {
    const events = items.map((i) => i.event);
    const started = performance.now();
    const missing = idsWithoutCreatedAt(events);
    const known = missing.length > 0 ? await this.writer.knownCreatedAt(missing) : undefined;
    const result = await this.writer.write(foldBatch(events, known));
    this.metrics.written(events.length, (performance.now() - started) / 1000, result);
  }

  private async refused(item: Item, err: unknown): Promise<void> {
    const ids = { message_id: item.event.message_id, trace_id: item.event.trace_id, state: item.event.state };
    const storable = storableEvent(item.event);
    if (storable !== item.event) {
      try {
        await this.writeEvents([{ ...item, event: storable }]);
        this.metrics.sanitized(item.record.topic);
        this.log.error({ err, ...ids }, 'status event refused by PostgreSQL for its text; stored with NUL and lone surrogates replaced by U+FFFD');
        return;
      } catch (again) {
        if (!isDataError(again)) throw again;
      }
    }
    this.log.error({ err, ...ids }, 'status event refused by PostgreSQL; sent to the DLQ');
    item.out.push(
      this.poison(item.record, new NonRetryableError('INVALID_ENVELOPE', `status event refused by PostgreSQL: ${(err as Error).message}`), item.event),
    );
  }

  /**
   * A dead letter for a record, or for one event of a batch record: the batch's place (topic,
   * partition, offset) with that event alone as its value, framed as a single StatusEvent, so an
   * operator sees the event that failed and not its batch neighbours that were stored.
   */
  private poison(record: InRecord, error: ReachError, event?: StatusEvent): OutRecord {
    this.metrics.unusable(record.topic);
    const alone =
      event && record.topic === TOPICS.statusBatches.name
        ? { ...record, key: Buffer.from(event.message_id), value: this.codec.encode(STATUS_SUBJECT, event) }
        : record;
    return deadLetterRecord(this.codec, { service: this.service, error, record: alone });
  }
}

/**
 * The event with the text PostgreSQL cannot store (NUL, lone surrogates) replaced in its reason
 * and detail; the same object when there is nothing to replace.
 */
export function storableEvent(event: StatusEvent): StatusEvent {
  const reason = event.reason === null ? null : storableText(event.reason);
  let detail = event.detail_json;
  if (detail !== null) {
    try {
      detail = JSON.stringify(storableJson(JSON.parse(detail)));
    } catch {
      detail = storableText(detail);
    }
    if (detail === event.detail_json) detail = event.detail_json;
  }
  return reason === event.reason && detail === event.detail_json ? event : { ...event, reason, detail_json: detail };
}
