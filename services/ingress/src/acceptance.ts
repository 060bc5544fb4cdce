import {
  errorInfo,
  isKnownCode,
  type ErrorName,
  MESSAGE_ID_PATTERN,
  PRODUCER_DOMAIN_HEADER,
  ReachError,
  toReachError,
  type Logger,
  ATTEMPT_HEADER,
  TOKEN_HEADER,
  ENVELOPE_NAME_PATTERN,
} from '@reach/core';
import { validateEnvelope, type DeadLetterReason, type Envelope, type MessageState, type SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type InRecord, type OutRecord } from '@reach/kafka';
import { deadLetterRecord, receiptRecord, statusRecord } from '@reach/service-kit';
import { isTraceId, isValidTraceparent, type Tracer } from '@reach/tracing';
import { ADMIN_PRODUCER, Authenticator } from './auth.js';
import type { IdempotencyClaim, IdempotencyStore } from './idempotency.js';
import type { QuotaGate } from './quotas.js';
import { PRODUCER_DOMAIN_DETAIL } from './read-access.js';
import type { FoldedRefusals } from './refusal-flood.js';
import type { EventRow, MessageRow } from './read-model.js';
import { withBudgetFrom, type ReplayChains } from './replay-chain.js';
import { traceparentFor } from './traceparent.js';

const PENDING_SUBJECT = valueSubject(TOPICS.pending.name);

/** The producer a refusal is counted against when neither a token nor an envelope names one. */
export const UNKNOWN_PRODUCER = '(unknown)';

/** Where a submission came from. */
export type Via =
  | { readonly kind: 'kafka'; readonly record: InRecord }
  /** `a2aMessageId`: sent as an A2A message (docs/a2a.md); its messageId goes into the PENDING detail. */
  | { readonly kind: 'http'; readonly a2aMessageId?: string };

export interface Submission {
  readonly envelope: Envelope;
  /** The agent token (reach-token header or bearer token) as given, possibly missing. */
  readonly token: string | undefined;
  readonly via: Via;
  /** The W3C traceparent the producer sent, if any. */
  readonly traceparent?: string | undefined;
  /**
   * The attempt a dead-letter replay starts (the `reach-attempt` header): honoured only with
   * the admin token, so a replay shows up as a new attempt of the same message in the read
   * model. Anyone else's value is ignored (an agent cannot jump a message's attempts).
   */
  readonly attempt?: number | undefined;
}

/** The PENDING detail field that holds where a replay's budget starts (ISO time; docs/pipeline.md). */
export const BUDGET_FROM_DETAIL = 'budget_from';

/** A replay's attempt from its header: a positive integer, else 0 (a first attempt). */
export function attemptFromHeader(raw: string | undefined): number {
  const n = Number(raw ?? '0');
  return Number.isInteger(n) && n > 0 && n < 1_000_000 ? n : 0;
}

export type Acceptance =
  /** Produce `records` (the envelope on reach.pending.v1 + its PENDING status), then it is accepted. */
  | { readonly outcome: 'accepted'; readonly envelope: Envelope; readonly records: readonly OutRecord[] }
  /** The idempotency key belongs to an earlier message: nothing to produce. */
  | { readonly outcome: 'duplicate'; readonly envelope: Envelope; readonly originalId: string }
  /** Refused: produce `records` (Kafka path: DLQ entry, REJECTED status, receipt) so the refusal is never silent; none on HTTP, whose caller gets the answer. */
  | { readonly outcome: 'rejected'; readonly envelope: Envelope; readonly error: ReachError; readonly records: readonly OutRecord[] };

export interface AcceptorDeps {
  codec: SchemaCodec;
  auth: Authenticator;
  idempotency: Pick<IdempotencyStore, 'claim'>;
  /** Per-producer quotas (R-D7); without it no producer is rate-limited. */
  quotas?: QuotaGate;
  service: string;
  instance: string;
  maxPayloadBytes: number;
  log: Logger;
  /** An `ingest` span per submission when tracing is on. */
  tracer?: Tracer;
  /** Clears what the pipeline remembers of a replayed message's earlier chain (replay-chain.ts). */
  replayChains?: Pick<ReplayChains, 'start'>;
}

/** The consumed record without the producer's token: DLQ entries are kept and shown to admins. */
function withoutToken(record: InRecord): InRecord {
  if (!(TOKEN_HEADER in record.headers)) return record;
  const headers = { ...record.headers };
  delete headers[TOKEN_HEADER];
  return { ...record, headers };
}

function viaDetail(via: Via): Record<string, unknown> {
  if (via.kind === 'kafka') return { via: 'kafka', partition: via.record.partition, offset: via.record.offset };
  return via.a2aMessageId !== undefined ? { via: 'a2a', a2a_message_id: via.a2aMessageId } : { via: 'http' };
}

/**
 * The one acceptance path of both ingress paths (R-C1: they validate identically):
 * token and producer (1003) → envelope rules (4101/4102) → producer quota (4129, R-D7) →
 * idempotency key (R-D5) → the records that hand the message to the pipeline. The caller
 * produces the records: the Kafka stage before committing the source offset, the HTTP API
 * before answering.
 */
export class Acceptor {
  constructor(private readonly deps: AcceptorDeps) {}

  async accept(submitted: Submission, now: number = Date.now()): Promise<Acceptance> {
    const tracer = this.deps.tracer;
    if (!tracer?.enabled) return this.acceptIn(submitted, now, undefined);
    // The span joins the producer's trace, else starts the envelope's own; a trace id that is
    // not W3C-shaped has no trace to join (the pending record then carries no traceparent).
    const env = submitted.envelope;
    const parent = isValidTraceparent(submitted.traceparent) ? submitted.traceparent : undefined;
    if (parent === undefined && !isTraceId(env.trace_id.toLowerCase())) return this.acceptIn(submitted, now, undefined);
    const span = tracer.startSpan('ingest', {
      parent,
      traceId: env.trace_id,
      kind: submitted.via.kind === 'http' ? 'server' : 'consumer',
      attributes: {
        'reach.message_id': env.message_id,
        'reach.message_type': env.message_type,
        'reach.producer': env.producer,
        'reach.via': submitted.via.kind,
      },
    });
    try {
      const acceptance = await this.acceptIn(submitted, now, span.traceparent);
      span.setAttributes({ 'reach.ingest.outcome': acceptance.outcome });
      if (acceptance.outcome === 'rejected') span.fail(acceptance.error);
      return acceptance;
    } catch (err) {
      span.fail(toReachError(err));
      throw err;
    } finally {
      span.end();
    }
  }

  /** accept() within its span; `spanTraceparent` (the ingest span) goes on the pending record. */
  private async acceptIn(submitted: Submission, now: number, spanTraceparent: string | undefined): Promise<Acceptance> {
    let s = submitted;
    let attempt = 0;
    let admin = false;
    try {
      const principal = this.deps.auth.authenticate(s.token, now);
      Authenticator.checkProducer(principal, s.envelope.producer);
      admin = principal.admin;
      if (principal.admin) attempt = s.attempt ?? 0;
      // The router checks security domains against this header (R-A8); only the token
      // says what it is. An admin send (a replay, say) keeps the header of the original.
      else s = { ...s, envelope: { ...s.envelope, headers: { ...s.envelope.headers, [PRODUCER_DOMAIN_HEADER]: principal.domain ?? 'default' } } };
    } catch (err) {
      return this.reject(s, toReachError(err), now);
    }
    // A dead-letter replay starts a new attempt chain with a budget of its own (replay-chain.ts).
    const replay = admin && attempt > 0;
    s = { ...s, envelope: withBudgetFrom(s.envelope, replay ? now : undefined) };
    const { envelope } = s;
    const invalid = validateEnvelope(envelope, { maxPayloadBytes: this.deps.maxPayloadBytes }, now);
    if (invalid) return this.reject(s, invalid, now);

    // Encoded before the key is claimed: an envelope the schema refuses (an int out of range
    // from JSON, say) must not leave its key taken by a message that never went anywhere.
    let pending: OutRecord;
    try {
      pending = this.pendingRecord(s, attempt, spanTraceparent);
    } catch (err) {
      const error = toReachError(err);
      if (error.retryable) throw error;
      return this.reject(s, error, now);
    }

    // Only a proven producer is counted (a forged record must not drain someone else's bucket),
    // and only a valid message (the quota bounds what enters the pipeline). The admin token is
    // exempt: operators' sends and dead-letter replays (which carry the original producer, and
    // are paced by the replayer) must not be refused for an agent's storm.
    const { quotas } = this.deps;
    const metered = quotas !== undefined && !admin;
    if (metered) {
      // A Kafka record is metered at the time it was produced: a backlog consumed after an
      // outage is not refused for being caught up with faster than it was written.
      const verdict = await quotas.admit(envelope, s.via.kind === 'kafka' ? Number(s.via.record.timestamp) : undefined);
      if (verdict.kind === 'duplicate') return this.duplicate(s, verdict.messageId);
      if (verdict.kind === 'limited') return this.reject(s, verdict.error, now);
    }

    if (envelope.idempotency_key !== null) {
      let claim: IdempotencyClaim;
      try {
        claim = await this.deps.idempotency.claim(envelope.producer, envelope.idempotency_key, envelope.message_id);
      } catch (err) {
        // Nothing entered the pipeline, and the record comes again (Kafka redelivers the batch,
        // an HTTP caller retries its 503): the token this attempt took goes back, or every retry
        // through an idempotency-store outage would cost the producer another one.
        if (metered) await this.giveBack(envelope.producer, envelope.message_id);
        throw err;
      }
      if (claim.kind === 'duplicate') {
        // A resubmission costs no quota: nothing new enters the pipeline.
        if (metered) await this.giveBack(envelope.producer, envelope.message_id);
        return this.duplicate(s, claim.messageId);
      }
    }
    if (replay) await this.deps.replayChains?.start(envelope.message_id);
    const status = statusRecord(
      this.deps.codec,
      {
        state: 'PENDING',
        envelope,
        service: this.deps.service,
        instance: this.deps.instance,
        attempt,
        // The producer's domain on the timeline lets REACH_READS_SAME_DOMAIN decide reads (read-access.ts).
        detail: {
          ...viaDetail(s.via),
          [PRODUCER_DOMAIN_DETAIL]: envelope.headers[PRODUCER_DOMAIN_HEADER] ?? null,
          // the timeline (and the stuck sweep) see where a replay's budget starts
          ...(replay ? { [BUDGET_FROM_DETAIL]: new Date(now).toISOString() } : {}),
        },
      },
      now,
    );
    return { outcome: 'accepted', envelope, records: [pending, status] };
  }

  /** Returns an admitted message's quota token; a failure here only costs the producer that token. */
  private async giveBack(producer: string, messageId: string): Promise<void> {
    try {
      await this.deps.quotas?.giveBack(producer);
    } catch (err) {
      this.deps.log.warn({ err, producer, message_id: messageId }, 'could not give a quota token back');
    }
  }

  /**
   * Whom a refusal is counted against when floods are folded (refusal-flood.ts): the agent
   * that proved to hold the token, else the producer the envelope names, else nobody known.
   */
  refusedProducer(token: string | undefined, envelope: Envelope | undefined): string {
    return this.deps.auth.identify(token) ?? (envelope ? `unproven:${envelope.producer}` : UNKNOWN_PRODUCER);
  }

  /** The one dead letter that stands for a second of folded refusals: their count, no record. */
  foldedDeadLetter(f: FoldedRefusals, now: number = Date.now()): OutRecord {
    const name = (isKnownCode(f.code) ? errorInfo(f.code).name : 'INTERNAL') as ErrorName;
    const at = new Date(f.second * 1000).toISOString();
    const error = new ReachError(
      name,
      `${f.folded} more refusals (${f.total} in all) of producer ${f.producer} with code ${f.code} in the second from ${at}; the first ${f.total - f.folded} are dead letters of their own`,
    );
    return deadLetterRecord(
      this.deps.codec,
      {
        service: this.deps.service,
        error,
        reason: name === 'RATE_LIMITED' ? 'RATE_LIMITED' : 'INVALID',
        sourceTopic: TOPICS.ingress.name,
        producer: f.producer,
        history: { folded_refusals: { producer: f.producer, code: f.code, second: at, count: f.folded, total: f.total } },
      },
      now,
    );
  }

  private duplicate(s: Submission, originalId: string): Acceptance {
    const { envelope } = s;
    this.deps.log.info(
      { message_id: envelope.message_id, original_message_id: originalId, trace_id: envelope.trace_id, via: s.via.kind },
      'duplicate idempotency key; not forwarded again',
    );
    return { outcome: 'duplicate', envelope, originalId };
  }

  /**
   * A Kafka record that could not even be decoded: only its bytes can be kept (DLQ, reason
   * INVALID, with its code). There is no message id to report on and no producer to tell.
   */
  undecodable(record: InRecord, error: ReachError, now: number = Date.now()): OutRecord[] {
    return [deadLetterRecord(this.deps.codec, { service: this.deps.service, error, record: withoutToken(record), reason: 'INVALID' }, now)];
  }

  private pendingRecord(s: Submission, attempt: number, spanTraceparent: string | undefined): OutRecord {
    const env = s.envelope;
    const traceparent = spanTraceparent ?? traceparentFor(env.trace_id, s.traceparent);
    const headers: Record<string, string> = traceparent ? { traceparent } : {};
    if (attempt > 0) headers[ATTEMPT_HEADER] = String(attempt);
    return {
      topic: TOPICS.pending.name,
      key: env.session_id ?? env.message_id,
      // Re-encoded with this build's schema: downstream stages only ever see the current version.
      value: this.deps.codec.encode(PENDING_SUBJECT, env),
      headers,
    };
  }

  private reject(s: Submission, error: ReachError, now: number): Acceptance {
    const env = s.envelope;
    // An HTTP caller gets the refusal in its answer, and that is all (issue #13): a dead
    // letter and a status row per 429 let one client flood the DLQ and the read model.
    if (s.via.kind === 'http') {
      this.deps.log.debug({ message_id: env.message_id, producer: env.producer, code: error.code, err: error.message, via: 'http' }, 'message refused');
      return { outcome: 'rejected', envelope: env, error, records: [] };
    }
    const { codec, service, instance } = this.deps;
    // Whoever proved to hold the token (even an expired or revoked one). Refusals of records
    // nobody authenticated are not written to the read model: anyone could otherwise mark
    // another producer's message REJECTED by sending garbage under its id.
    const identity = this.deps.auth.identify(s.token);
    const records: OutRecord[] = [this.deadLetter(s, error, now)];
    if (identity !== undefined && MESSAGE_ID_PATTERN.test(env.message_id)) {
      records.push(
        statusRecord(codec, { state: 'REJECTED', envelope: env, service, instance, code: error.code, reason: error.message, detail: viaDetail(s.via) }, now),
      );
    }
    // A Kafka producer learns of the refusal only through a receipt.
    const receipt = this.receipt(env, error, identity, now);
    if (receipt) records.push(receipt);
    this.deps.log.warn(
      { message_id: env.message_id, trace_id: env.trace_id, producer: env.producer, code: error.code, err: error.message, via: s.via.kind },
      'message rejected',
    );
    return { outcome: 'rejected', envelope: env, error, records };
  }

  private deadLetter(s: Submission, error: ReachError, now: number): OutRecord {
    const reason: DeadLetterReason = error.codeName === 'RATE_LIMITED' ? 'RATE_LIMITED' : 'INVALID';
    const record = s.via.kind === 'kafka' ? withoutToken(s.via.record) : undefined;
    const base = { service: this.deps.service, error, reason, ...(record ? { record } : { sourceTopic: 'http' }) };
    try {
      return deadLetterRecord(this.deps.codec, { ...base, envelope: s.envelope }, now);
    } catch {
      // The envelope itself does not fit the schema (that may be why it was refused): keep the
      // entry without it; a Kafka record's raw bytes are kept instead.
      return deadLetterRecord(this.deps.codec, base, now);
    }
  }

  private receipt(env: Envelope, error: ReachError, identity: string | undefined, now: number): OutRecord | undefined {
    // The producer itself (or an admin replaying for it) may direct receipts via reply_to. A
    // token of another agent gets the receipt itself; without a proven identity the named
    // producer is told, never redirected elsewhere.
    let original: Envelope;
    if (identity === env.producer || identity === ADMIN_PRODUCER) original = env;
    else if (identity !== undefined) original = { ...env, producer: identity, reply_to: null };
    else original = { ...env, reply_to: null };
    const target = original.reply_to ?? original.producer;
    if (!ENVELOPE_NAME_PATTERN.test(target) || target === ADMIN_PRODUCER) return undefined;
    try {
      return receiptRecord(this.deps.codec, original, { state: 'REJECTED', code: error.code, reason: error.message }, now);
    } catch (err) {
      this.deps.log.warn({ err, message_id: env.message_id }, 'could not build the receipt of a rejected message');
      return undefined;
    }
  }
}

/** The read-model row this instance can vouch for right after reporting a message's state. */
export function provisionalRow(
  env: Envelope,
  state: MessageState,
  reporter: { service: string; instance: string },
  now: number,
  error?: ReachError,
): { message: MessageRow; event: EventRow } {
  const message: MessageRow = {
    message_id: env.message_id,
    status: state,
    attempt: 0,
    agent_id: null,
    code: error?.code ?? null,
    reason: error?.message ?? null,
    updated_at: new Date(now),
    created_at: new Date(env.created_at),
    trace_id: env.trace_id,
    producer: env.producer,
    message_type: env.message_type,
    capability: env.capability,
    topic: env.topic,
    target_agent_id: env.target_agent_id,
    parent_message_id: null,
    result: null,
  };
  const event: EventRow = {
    message_id: env.message_id,
    state,
    at: new Date(now),
    attempt: 0,
    service: reporter.service,
    instance: reporter.instance,
    agent_id: null,
    code: message.code,
    reason: message.reason,
    detail: { via: 'http', [PRODUCER_DOMAIN_DETAIL]: env.headers[PRODUCER_DOMAIN_HEADER] ?? null },
  };
  return { message, event };
}
