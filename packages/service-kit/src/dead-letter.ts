import {
  newId,
  type ReachError,
  TOKEN_HEADER,
  TRACEPARENT_HEADER,
  DLQ_PRODUCER_HEADER,
  DLQ_CODE_HEADER,
  DLQ_REASON_HEADER,
  DLQ_TRACE_ID_HEADER,
  POISON_ERROR_HEADER,
  POISON_SERVICE_HEADER,
  POISON_SOURCE_HEADER,
} from '@reach/core';
import type { DeadLetter, DeadLetterReason, Envelope, SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type InRecord, type OutRecord } from '@reach/kafka';

const DLQ_SUBJECT = valueSubject(TOPICS.dlq.name);

function reasonFor(error: ReachError): DeadLetterReason {
  switch (error.codeName) {
    case 'NO_ROUTE':
      return 'NO_ROUTE';
    case 'RETRIES_EXHAUSTED':
      return 'RETRIES_EXHAUSTED';
    case 'BUDGET_EXCEEDED':
      return 'BUDGET_EXCEEDED';
    case 'EXPIRED':
      return 'EXPIRED';
    case 'AGENT_REJECTED':
      return 'REJECTED';
    case 'RATE_LIMITED':
      return 'RATE_LIMITED';
    case 'INVALID_ENVELOPE':
    case 'PAYLOAD_TOO_LARGE':
    case 'UNKNOWN_SCHEMA':
    case 'AUTH_FAILED':
    case 'DOMAIN_DENIED':
      return 'INVALID';
    default:
      return 'UNPROCESSABLE';
  }
}

/** Credentials never go into the DLQ (admins read it): the agent token header is dropped. */
function withoutSecrets(headers: Readonly<Record<string, string>>): Record<string, string> {
  const { [TOKEN_HEADER]: _token, ...rest } = headers;
  return rest;
}

export interface DeadLetterInput {
  service: string;
  error: ReachError;
  /** The consumed record, when there is one (its bytes are kept if no envelope is known). */
  record?: InRecord;
  envelope?: Envelope | null;
  reason?: DeadLetterReason;
  attempts?: number;
  history?: unknown;
  /** Where the message came from when there is no consumed record (e.g. HTTP). */
  sourceTopic?: string;
  /** The position on sourceTopic of the record the message came from, when it is known but not consumed here (a buffered delivery). */
  sourcePosition?: { partition: number; offset: string };
  /** The producer, when there is neither an envelope nor a record to name it (a folded flood of refusals). */
  producer?: string;
}

/**
 * Builds the reach.dlq.v1 record for a message or record that cannot go on. Undecodable
 * records keep their original key, value and headers so nothing is lost and an admin can
 * inspect and replay them.
 */
export function deadLetterRecord(codec: SchemaCodec, input: DeadLetterInput, now: number = Date.now()): OutRecord {
  const env = input.envelope ?? null;
  const keepRaw = env === null && input.record !== undefined;
  const value: DeadLetter = {
    dlq_id: newId('dlq', now),
    message_id: env?.message_id ?? null,
    reason: input.reason ?? reasonFor(input.error),
    code: input.error.code,
    error: input.error.message.slice(0, 4000),
    at: now,
    service: input.service,
    source_topic: input.record?.topic ?? input.sourceTopic ?? 'http',
    source_partition: input.record?.partition ?? input.sourcePosition?.partition ?? -1,
    source_offset: input.record ? Number(input.record.offset) : input.sourcePosition ? Number(input.sourcePosition.offset) : -1,
    attempts: input.attempts ?? 0,
    producer: env?.producer ?? input.record?.headers[DLQ_PRODUCER_HEADER] ?? input.producer ?? null,
    trace_id: env?.trace_id ?? null,
    history_json: input.history === undefined ? null : JSON.stringify(input.history),
    envelope: env,
    raw_key: keepRaw ? (input.record!.key ?? null) : null,
    raw_value: keepRaw ? (input.record!.value ?? null) : null,
    raw_headers: input.record ? withoutSecrets(input.record.headers) : {},
  };
  // An envelope too large to re-encode (4102) is kept as raw bytes instead.
  if (env && input.error.codeName === 'PAYLOAD_TOO_LARGE') {
    value.envelope = null;
    value.raw_value = input.record?.value ?? null;
    value.raw_key = input.record?.key ?? null;
  }
  return {
    topic: TOPICS.dlq.name,
    key: value.message_id ?? value.dlq_id,
    value: codec.encode(DLQ_SUBJECT, value),
    headers: {
      [DLQ_CODE_HEADER]: String(value.code),
      [DLQ_REASON_HEADER]: value.reason,
      ...(value.trace_id ? { [DLQ_TRACE_ID_HEADER]: value.trace_id } : {}),
      // The failed record's context: a stage's outputs are re-pointed to its span, so the
      // dead-letter service's span becomes a child of the span that gave up.
      ...(input.record?.headers[TRACEPARENT_HEADER] ? { [TRACEPARENT_HEADER]: input.record.headers[TRACEPARENT_HEADER] } : {}),
    },
  };
}

/**
 * A record the dead-letter stage itself cannot store, for reach.poison.v1: its key, value and
 * headers as consumed (credentials dropped) plus where it came from and why it failed, so an
 * operator can read it with any Kafka client and produce it again to its source topic once the
 * cause is fixed. Sending it to reach.dlq.v1 would loop.
 */
export function poisonRecord(record: InRecord, service: string, err: unknown): OutRecord {
  const message = err instanceof Error ? err.message : String(err);
  return {
    topic: TOPICS.poison.name,
    key: record.key,
    value: record.value,
    headers: {
      ...withoutSecrets(record.headers),
      [POISON_ERROR_HEADER]: message.slice(0, 4000),
      [POISON_SERVICE_HEADER]: service,
      [POISON_SOURCE_HEADER]: `${record.topic}/${record.partition}/${record.offset}`,
    },
  };
}
