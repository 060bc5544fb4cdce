import { newId, toReachError, type Logger } from '@reach/core';
import type { DeadLetter, Envelope, SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type InRecord, type OutRecord } from '@reach/kafka';
import { entryFromDeadLetter, entryFromUndecodable, type EntryInsert } from './entry.js';
import type { DeadLetterMetrics } from './metrics.js';
import type { DeadLetterStore } from './store.js';
import { NOOP_TRACER, type StageSpan, type Tracer } from '@reach/tracing';

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
    private readonly tracer: Tracer = NOOP_TRACER,
  ) {}

  async handle(records: readonly InRecord[]): Promise<readonly OutRecord[]> {
    const rows: EntryInsert[] = [];
    const spans: StageSpan[] = [];
    for (const record of records) rows.push(await this.row(record, spans));
    const inserted = await this.store.insert(rows);
    for (const span of spans) span.end();
    this.metrics.storedRows(inserted);
    for (const r of rows) {
      this.log.info(
        { dlq_id: r.dlq_id, message_id: r.message_id, trace_id: r.trace_id, reason: r.reason, code: r.code, service_from: r.service },
        'dead letter stored',
      );
    }
    return [];
  }

  private async row(record: InRecord, spans: StageSpan[]): Promise<EntryInsert> {
    let dl: DeadLetter;
    try {
      dl = await this.codec.decode<DeadLetter>(DLQ_SUBJECT, record.value);
    } catch (err) {
      const error = toReachError(err);
      if (error.retryable && error.codeName !== 'INTERNAL') throw error;
      this.log.warn({ code: error.code, err: error.message, partition: record.partition, offset: record.offset }, 'undecodable dead-letter record stored raw');
      return entryFromUndecodable(record, newId('dlq'), error, this.service);
    }
    return entryFromDeadLetter(dl, dl.envelope ? this.framed(dl.envelope) : null, this.traced(dl, record, spans));
  }

  /**
   * The `dead_letter` span (SPEC R-F1): from the moment the stage gave up to the entry stored,
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
