import { errorInfo, isKnownCode } from '@reach/core';
import { storableEnvelopeJson, type DeadLetter } from '@reach/envelope';
import { storableJson, storableText } from '@reach/store';

/** Lifecycle of a stored dead letter (the CHECK of migration 003). */
export type EntryStatus = 'PARKED' | 'REPLAYED' | 'PURGED' | 'DEAD';

/** The `dead_letters` columns a dead letter is stored with, typed alike for writing and reading. */
interface EntryColumns {
  dlq_id: string;
  message_id: string | null;
  reason: string;
  code: number;
  error: string | null;
  service: string;
  source_topic: string | null;
  source_partition: number | null;
  source_offset: string | null;
  attempts: number;
  producer: string | null;
  trace_id: string | null;
  capability: string | null;
  message_type: string | null;
  envelope: Buffer | null;
  /** The `dead_letter` span's traceparent (else the failed record's): where a replay's trace continues. */
  traceparent: string | null;
}

/** One `dead_letters` row to insert (times as ISO strings, JSON columns as JSON text). */
export interface EntryInsert extends EntryColumns {
  history: string;
  envelope_json: string | null;
  created_at: string;
}

/** A `dead_letters` row as PostgreSQL returns it (JSON columns parsed, times as Dates). */
export interface EntryRow extends EntryColumns {
  history: unknown;
  envelope_json: Record<string, unknown> | null;
  status: EntryStatus;
  created_at: Date;
  updated_at: Date;
  replayed_at: Date | null;
  replay_count: number;
}

/** The attempts history as an array: producers send an array, a routing trace object, or nothing. */
export function historyOf(historyJson: string | null): unknown[] {
  if (historyJson === null) return [];
  try {
    const parsed = JSON.parse(historyJson) as unknown;
    if (Array.isArray(parsed)) return parsed;
    return parsed === null ? [] : [parsed];
  } catch {
    // kept, not lost: an entry whose history is not JSON still shows what was sent
    return [{ unparsed: historyJson }];
  }
}

function storable(v: string | null): string | null {
  return v === null ? null : storableText(v);
}

/**
 * The row for a decoded reach.dlq.v1 record. `envelopeBytes` is the envelope framed for
 * reach.ingress.v1 (what a replay sends); an entry without an envelope keeps the raw bytes
 * that failed to decode and is not replayable.
 */
export function entryFromDeadLetter(dl: DeadLetter, envelopeBytes: Buffer | null, traceparent: string | null = null): EntryInsert {
  const env = dl.envelope;
  const known = dl.source_partition >= 0 && dl.source_offset >= 0;
  return {
    dlq_id: dl.dlq_id,
    message_id: storable(dl.message_id ?? env?.message_id ?? null),
    reason: dl.reason,
    code: dl.code,
    error: storable(dl.error),
    service: dl.service,
    source_topic: dl.source_topic || null,
    // -1 means "no consumed record" (HTTP): left NULL so the source uniqueness does not apply.
    source_partition: known ? dl.source_partition : null,
    source_offset: known ? String(dl.source_offset) : null,
    attempts: dl.attempts,
    producer: storable(dl.producer ?? env?.producer ?? null),
    trace_id: storable(dl.trace_id ?? env?.trace_id ?? null),
    capability: storable(env?.capability ?? null),
    message_type: storable(env?.message_type ?? null),
    // jsonb refuses NUL and lone surrogates (an agent's reject code or reason of an older dispatcher).
    history: JSON.stringify(storableJson(historyOf(dl.history_json))),
    envelope: env ? envelopeBytes : (dl.raw_value ?? null),
    // jsonb and text columns cannot hold NUL or lone surrogates, which a refused message may carry.
    envelope_json: env ? JSON.stringify(storableEnvelopeJson(env)) : null,
    created_at: new Date(dl.at).toISOString(),
    traceparent,
  };
}

/**
 * The row for a reach.dlq.v1 record that is itself undecodable: stored raw (reason
 * UNPROCESSABLE) under its own position on the DLQ topic, so a re-read stores it once.
 */
export function entryFromUndecodable(
  rec: { topic: string; partition: number; offset: string; value: Buffer | null; timestamp: string },
  dlqId: string,
  error: { code: number; message: string },
  service: string,
): EntryInsert {
  const ts = Number(rec.timestamp);
  return {
    dlq_id: dlqId,
    message_id: null,
    reason: 'UNPROCESSABLE',
    code: error.code,
    error: `dead-letter record could not be decoded: ${error.message}`.slice(0, 4000),
    service,
    source_topic: rec.topic,
    source_partition: rec.partition,
    source_offset: rec.offset,
    attempts: 0,
    producer: null,
    trace_id: null,
    capability: null,
    message_type: null,
    history: '[]',
    envelope: rec.value,
    envelope_json: null,
    created_at: new Date(Number.isFinite(ts) && ts > 0 ? ts : Date.now()).toISOString(),
    traceparent: null,
  };
}

/** Only entries with a decoded envelope can go back through ingress. */
export function replayProblem(row: Pick<EntryRow, 'status' | 'envelope' | 'envelope_json'>): string | undefined {
  if (row.status === 'PURGED') return 'the entry was purged';
  if (row.envelope_json === null || row.envelope === null) {
    return 'the entry holds only the raw bytes of a record that could not be decoded; it cannot be replayed (inspect raw_b64 instead)';
  }
  return undefined;
}

/** expire_at of the stored envelope (epoch ms), if it has one. */
export function expireAtOf(row: Pick<EntryRow, 'envelope_json'>): number | undefined {
  const v = row.envelope_json?.expire_at;
  if (typeof v !== 'string') return undefined;
  const ms = Date.parse(v);
  return Number.isFinite(ms) ? ms : undefined;
}

const iso = (d: Date | null): string | null => (d === null ? null : d.toISOString());

/** The API's JSON form of an entry: the summary for lists, everything for `GET /v1/dlq/{id}`. */
export function entryJson(row: EntryRow, full: boolean): Record<string, unknown> {
  const expireAt = expireAtOf(row);
  const out: Record<string, unknown> = {
    dlq_id: row.dlq_id,
    message_id: row.message_id,
    status: row.status,
    reason: row.reason,
    code: row.code,
    name: isKnownCode(row.code) ? errorInfo(row.code).name : null,
    error: row.error,
    service: row.service,
    capability: row.capability,
    topic: typeof row.envelope_json?.topic === 'string' ? row.envelope_json.topic : null,
    target_agent_id: typeof row.envelope_json?.target_agent_id === 'string' ? row.envelope_json.target_agent_id : null,
    message_type: row.message_type,
    producer: row.producer,
    trace_id: row.trace_id,
    attempts: row.attempts,
    replay_count: row.replay_count,
    replayable: replayProblem(row) === undefined,
    expire_at: expireAt === undefined ? null : new Date(expireAt).toISOString(),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
    replayed_at: iso(row.replayed_at),
  };
  if (full) {
    out.source = { topic: row.source_topic, partition: row.source_partition, offset: row.source_offset };
    out.history = row.history;
    out.envelope = row.envelope_json;
    if (row.envelope_json === null) out.raw_b64 = row.envelope ? row.envelope.toString('base64') : null;
  }
  return out;
}

const TEXT_COLUMNS = [
  'dlq_id',
  'message_id',
  'reason',
  'error',
  'service',
  'source_topic',
  'producer',
  'trace_id',
  'capability',
  'message_type',
  'traceparent',
] as const satisfies ReadonlyArray<keyof EntryInsert>;

/** JSON text that may hold what PostgreSQL refuses: NUL or a surrogate, raw or as an escape. */
// eslint-disable-next-line no-control-regex
const MAYBE_UNSTORABLE = /\\u0000|\\u[dD][89a-fA-F]|[\u0000\ud800-\udfff]/;

function storableJsonText(json: string): string {
  if (!MAYBE_UNSTORABLE.test(json)) return json;
  try {
    return JSON.stringify(storableJson(JSON.parse(json)));
  } catch {
    return storableText(json);
  }
}

/**
 * The row with the text PostgreSQL cannot store (NUL, lone surrogates) replaced by U+FFFD in
 * its text and JSON columns; `envelope` (bytea, what a replay sends) is kept exact. The same
 * object when there is nothing to replace.
 */
export function storableEntry(row: EntryInsert): EntryInsert {
  const out: EntryInsert = { ...row };
  let changed = false;
  for (const col of TEXT_COLUMNS) {
    const v = row[col];
    if (typeof v !== 'string') continue;
    const s = storableText(v);
    if (s !== v) {
      (out as unknown as Record<string, string>)[col] = s;
      changed = true;
    }
  }
  const history = storableJsonText(row.history);
  if (history !== row.history) {
    out.history = history;
    changed = true;
  }
  if (row.envelope_json !== null) {
    const env = storableJsonText(row.envelope_json);
    if (env !== row.envelope_json) {
      out.envelope_json = env;
      changed = true;
    }
  }
  return changed ? out : row;
}
