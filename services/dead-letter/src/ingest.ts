import { newId, toReachError, type Logger } from '@reach/core';
import type { DeadLetter, Envelope, SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type InRecord, type OutRecord } from '@reach/kafka';
import { entryFromDeadLetter, entryFromUndecodable, type EntryInsert } from './entry.js';
import type { DeadLetterMetrics } from './metrics.js';
import type { DeadLetterStore } from './store.js';

const DLQ_SUBJECT = valueSubject(TOPICS.dlq.name);
const INGRESS_SUBJECT = valueSubject(TOPICS.ingress.name);

/**
 * Handles one batch of reach.dlq.v1 records: decode, one multi-row insert. The batch stage
 * commits offsets only after this returns (the rows are in PostgreSQL). A DLQ record that
 * cannot be decoded is stored raw (reason UNPROCESSABLE) rather than sent to the DLQ again,
 * which would loop; only a dependency failure (registry, PostgreSQL) fails the batch.
 */
export class DeadLetterIngest {
  constructor(
    private readonly codec: SchemaCodec,
    private readonly store: DeadLetterStore,
    private readonly metrics: DeadLetterMetrics,
    private readonly log: Logger,
    private readonly service: string,
  ) {}

  async handle(records: readonly InRecord[]): Promise<readonly OutRecord[]> {
    const rows: EntryInsert[] = [];
    for (const record of records) rows.push(await this.row(record));
    const inserted = await this.store.insert(rows);
    this.metrics.storedRows(inserted);
    for (const r of rows) {
      this.log.info(
        { dlq_id: r.dlq_id, message_id: r.message_id, trace_id: r.trace_id, reason: r.reason, code: r.code, service_from: r.service },
        'dead letter stored',
      );
    }
    return [];
  }

  private async row(record: InRecord): Promise<EntryInsert> {
    let dl: DeadLetter;
    try {
      dl = await this.codec.decode<DeadLetter>(DLQ_SUBJECT, record.value);
    } catch (err) {
      const error = toReachError(err);
      if (error.retryable && error.codeName !== 'INTERNAL') throw error;
      this.log.warn({ code: error.code, err: error.message, partition: record.partition, offset: record.offset }, 'undecodable dead-letter record stored raw');
      return entryFromUndecodable(record, newId('dlq'), error, this.service);
    }
    return entryFromDeadLetter(dl, dl.envelope ? this.framed(dl.envelope) : null);
  }

  /** The envelope framed for reach.ingress.v1: exactly what a replay produces. */
  private framed(env: Envelope): Buffer | null {
    try {
      return this.codec.encode(INGRESS_SUBJECT, env);
    } catch (err) {
      // kept inspectable as JSON; only the replay is impossible (409)
      this.log.warn({ err, message_id: env.message_id, trace_id: env.trace_id }, 'stored envelope cannot be re-encoded; the entry will not be replayable');
      return null;
    }
  }
}
