import { newId, toReachError, type Logger } from '@reach/core';
import type { DeadLetter, Envelope, SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type InRecord, type OutRecord } from '@reach/kafka';
import { entryFromDeadLetter, entryFromUndecodable, storableEntry, type EntryInsert } from './entry.js';
import { isDataError, writeIsolatingRefused } from '@reach/store';
import { poisonRecord } from '@reach/service-kit';
import type { DeadLetterMetrics } from './metrics.js';
import type { DeadLetterStore } from './store.js';
import { NOOP_TRACER, type StageSpan, type Tracer } from '@reach/tracing';

const DLQ_SUBJECT = valueSubject(TOPICS.dlq.name);
const INGRESS_SUBJECT = valueSubject(TOPICS.ingress.name);

/** A dead letter to store and the record it came from. */
interface Pending {
  readonly record: InRecord;
  readonly row: EntryInsert;
}

/**
 * Handles one batch of reach.dlq.v1 records: decode, one multi-row insert. The batch stage
 * commits offsets only after this returns (the rows are in PostgreSQL). A DLQ record that
 * cannot be decoded is stored raw (reason UNPROCESSABLE) rather than sent to the DLQ again,
 * which would loop. A row PostgreSQL refuses for its content (a NUL byte or a lone surrogate
 * in its text) is isolated from its batch and stored with that text made storable — its
 * `envelope` bytes stay exact, so a replay sends what was sent —; a row refused even then is
 * parked on reach.poison.v1 as it was consumed. Only a dependency failure (registry,
 * PostgreSQL away) fails the batch: no record can stall the partition.
 */
export class DeadLetterIngest {
  constructor(
    private readonly codec: SchemaCodec,
    private readonly store: DeadLetterStore,
    private readonly metrics: DeadLetterMetrics,
    private readonly log: Logger,
    private readonly service: string,
    private readonly tracer: Tracer = NOOP_TRACER,
  ) {}

  async handle(records: readonly InRecord[]): Promise<readonly OutRecord[]> {
    const pending: Pending[] = [];
    const spans: StageSpan[] = [];
    for (const record of records) pending.push({ record, row: await this.row(record, spans) });
    const parked: OutRecord[] = [];
    await writeIsolatingRefused(
      pending,
      (batch) => this.insert(batch.map((p) => p.row)),
      async (p, err) => {
        parked.push(...(await this.refused(p, err)));
      },
    );
    for (const span of spans) span.end();
    return parked;
  }

  private async insert(rows: readonly EntryInsert[]): Promise<void> {
    this.metrics.storedRows(await this.store.insert(rows));
    for (const r of rows) {
      this.log.info(
        { dlq_id: r.dlq_id, message_id: r.message_id, trace_id: r.trace_id, reason: r.reason, code: r.code, service_from: r.service },
        'dead letter stored',
      );
    }
  }

  /** A row PostgreSQL refused for its content: stored sanitized, else parked on reach.poison.v1. */
  private async refused(p: Pending, err: unknown): Promise<OutRecord[]> {
    const where = { dlq_id: p.row.dlq_id, message_id: p.row.message_id, partition: p.record.partition, offset: p.record.offset };
    const storable = storableEntry(p.row);
    if (storable !== p.row) {
      try {
        await this.insert([storable]);
        this.metrics.poison(p.record.topic, 'stored_sanitized');
        this.log.error(
          { err, ...where },
          'dead letter refused by PostgreSQL for its text; stored with NUL and lone surrogates replaced by U+FFFD (its envelope bytes are exact)',
        );
        return [];
      } catch (again) {
        if (!isDataError(again)) throw again;
      }
    }
    this.metrics.poison(p.record.topic, 'poison_topic');
    this.log.error({ err, ...where }, `dead letter refused by PostgreSQL; parked on ${TOPICS.poison.name}`);
    return [poisonRecord(p.record, this.service, err)];
  }

  private async row(record: InRecord, spans: StageSpan[]): Promise<EntryInsert> {
    let dl: DeadLetter;
    try {
      dl = await this.codec.decode<DeadLetter>(DLQ_SUBJECT, record.value);
    } catch (err) {
      const error = toReachError(err);
      if (error.retryable && error.codeName !== 'INTERNAL') throw error;
      this.log.warn({ code: error.code, err: error.message, partition: record.partition, offset: record.offset }, 'undecodable dead-letter record stored raw');
      this.metrics.poison(record.topic, 'stored_raw');
      return entryFromUndecodable(record, newId('dlq'), error, this.service);
    }
    try {
      return entryFromDeadLetter(dl, dl.envelope ? this.framed(dl.envelope) : null, this.traced(dl, record, spans));
    } catch (err) {
      // A value no row can hold (a time outside any calendar): kept raw like an undecodable record.
      const error = toReachError(err);
      this.log.warn({ err: error.message, partition: record.partition, offset: record.offset }, 'dead letter with unusable fields stored raw');
      this.metrics.poison(record.topic, 'stored_raw');
      return entryFromUndecodable(record, dl.dlq_id, error, this.service);
    }
  }

  /**
   * The `dead_letter` span (R-F1): from the moment the stage gave up to the entry stored,
   * a child of that stage's span (the DLQ record's traceparent; older producers only left the
   * failed record's, in raw_headers). Returns the context a replay continues from.
   */
  private traced(dl: DeadLetter, record: InRecord, spans: StageSpan[]): string | null {
    const parent = record.headers.traceparent ?? dl.raw_headers.traceparent;
    if (!this.tracer.enabled) return parent ?? null;
    const span = this.tracer.startSpan('dead_letter', {
      parent,
      traceId: dl.trace_id ?? undefined,
      kind: 'consumer',
      startTime: dl.at,
      attributes: {
        'reach.dlq_id': dl.dlq_id,
        'reach.message_id': dl.message_id,
        'reach.dlq.reason': dl.reason,
        'reach.dlq.from': dl.service,
        'reach.attempt': dl.attempts,
      },
    });
    span.fail({ code: dl.code, message: dl.error ?? dl.reason });
    spans.push(span);
    return span.traceparent ?? parent ?? null;
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
