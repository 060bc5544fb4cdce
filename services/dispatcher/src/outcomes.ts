import { ReachError, type Logger } from '@reach/core';
import { envelopeFromJson, validateEnvelope, type Envelope, type EnvelopeJson, type SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type OutRecord } from '@reach/kafka';
import { receiptRecord, statusRecord } from '@reach/service-kit';
import { NOOP_TRACER, type Tracer } from '@reach/tracing';
import { settlesLate } from './ack-journal.js';
import { recordDispatchSpan } from './dispatch-span.js';
import { envelopeFromMessageJson, envelopeOfEntry, headOf, parseHead, type EntryHead } from './entry.js';
import type { Failures } from './failures.js';
import type { CircuitRecorder } from './circuit-recorder.js';
import type { DispatcherMetrics } from './metrics.js';
import type { Outbox } from './outbox.js';
import type { Promotion, ReplayBuffer } from './replay-buffer.js';

/**
 * What an agent's answer to a delivery does, whichever channel it came over (WebSocket frame
 * or HTTP push response): `ack` → DELIVERED, `reject` → REJECTED 3003 with the agent's own
 * code and reason, `result` → a DELIVERED event carrying the result (the tracker keeps it for
 * HTTP `wait_ms`) and, when the message named a `reply_to`, a correlated `task_result`
 * message produced to reach.ingress.v1 under the agent's token (ingress checks it like any
 * agent message). The buffer entry is removed first: of two concurrent answers only one
 * produces the status. Each answer frees a slot of the agent: what the buffer promoted into it
 * goes to `promoted` (promotions.ts) to be sent.
 */
const INGRESS_SUBJECT = valueSubject(TOPICS.ingress.name);

/** Envelope header telling the requester whether the handler succeeded. */
export const RESULT_STATUS_HEADER = 'reach-result-status';

export interface ResultInput {
  message_id: string;
  status: 'ok' | 'error';
  payload: unknown;
  payload_b64?: string | undefined;
  content_type?: string | undefined;
  headers?: Record<string, string> | undefined;
  /** The result frame's traceparent: the correlated reply continues that trace context. */
  traceparent?: string | undefined;
}

export interface RejectInput {
  code: number | string | undefined;
  reason: string | undefined;
  retryable: boolean | undefined;
  /** The reject frame's traceparent: a retry continues that trace context. */
  traceparent?: string | undefined;
}

export interface OutcomesDeps {
  buffer: ReplayBuffer;
  outbox: Outbox;
  codec: SchemaCodec;
  service: string;
  instance: string;
  maxPayloadBytes: number;
  metrics: DispatcherMetrics;
  log: Logger;
  /** Settles rejected attempts: a retry on another agent, or REJECTED/DEAD with DLQ and receipt. */
  failures?: Failures;
  circuits?: CircuitRecorder;
  /** Sends waiting deliveries promoted into the slot an answer freed. */
  promoted?: (promotions: readonly Promotion[]) => void;
  /** Records each delivery's dispatch span when its answer arrives (dispatch-span.ts). */
  tracer?: Tracer;
}

export type AnswerOutcome = 'done' | 'gone' | 'mismatch';

export class Outcomes {
  private readonly tracer: Tracer;

  constructor(private readonly d: OutcomesDeps) {
    this.tracer = d.tracer ?? NOOP_TRACER;
  }

  private status(
    state: 'DELIVERED' | 'REJECTED',
    agent: string,
    envelope: Envelope,
    ctx: { attempt: number; parent: string | null },
    extra: Partial<{ code: number; reason: string; detail: unknown }> = {},
    at: number = Date.now(),
  ): OutRecord {
    return statusRecord(
      this.d.codec,
      {
        state,
        envelope,
        service: this.d.service,
        instance: this.d.instance,
        attempt: ctx.attempt,
        agentId: agent,
        parentMessageId: ctx.parent,
        ...extra,
      },
      at,
    );
  }

  /** The DELIVERED event of an ack, at the time it was acked (also for the ack journal). */
  delivered(agent: string, head: EntryHead, at: number): OutRecord {
    return this.status('DELIVERED', agent, envelopeFromMessageJson(head.message), head, {}, at);
  }

  /** The agent acknowledged delivery `seq`: DELIVERED (its context stays for a result). */
  async ack(agent: string, seq: number, messageId: string): Promise<AnswerOutcome> {
    const ackedAt = Date.now();
    const taken = await this.d.buffer.take(agent, seq, messageId, true, false, ackedAt, ackedAt);
    if (taken.kind === 'gone') this.late('ack', agent, seq, messageId);
    if (taken.kind === 'ended') return this.ended('ack', agent, seq, messageId, taken.promotions);
    if (taken.kind !== 'taken') return taken.kind;
    this.d.promoted?.(taken.promotions);
    const head = this.headOrLog(taken.head, agent, messageId, seq);
    if (!head) return 'done';
    recordDispatchSpan(this.tracer, head, agent, 'ack', { seq });
    const envelope = envelopeFromMessageJson(head.message);
    // Journaled with the take: settled once DELIVERED is written; if it cannot be (Kafka away,
    // this process killed), the ack journal produces it later (ack-journal.ts).
    this.d.outbox
      .send([this.status('DELIVERED', agent, envelope, head, {}, ackedAt)])
      .then(
        () => this.d.buffer.settleAck(messageId, settlesLate(head.budget_at)),
        (err: unknown) =>
          this.d.log.warn({ err, trace_id: envelope.trace_id, message_id: messageId }, 'DELIVERED not produced yet; the ack journal retries it'),
      )
      .catch((err: unknown) => this.d.log.warn({ err, message_id: messageId }, 'could not settle a journaled ack; it is produced again (harmless)'));
    this.d.metrics.acks.inc();
    this.d.circuits?.record(agent, true);
    return 'done';
  }

  /** The agent refused delivery `seq`: REJECTED with 3003 and its own code and reason. */
  async reject(agent: string, seq: number, messageId: string, r: RejectInput): Promise<AnswerOutcome> {
    const failures = this.d.failures;
    const taken = await this.d.buffer.take(agent, seq, messageId, false, failures !== undefined);
    if (taken.kind === 'gone') this.late('reject', agent, seq, messageId);
    if (taken.kind === 'ended') return this.ended('reject', agent, seq, messageId, taken.promotions);
    if (taken.kind !== 'taken') return taken.kind;
    this.d.promoted?.(taken.promotions);
    const head = this.headOrLog(headOf(taken.head), agent, messageId, seq);
    if (!head) return 'done';
    const reason = r.reason ?? 'rejected by the agent';
    const detail = { agent_code: r.code ?? null, agent_reason: r.reason ?? null, retryable: r.retryable ?? null };
    if (failures) {
      // Only an explicit `retryable: true` asks for another attempt; a bare reject is final.
      const { records } = await failures.records({
        agent,
        envelope: envelopeOfEntry(taken.head),
        head,
        code: 3003,
        reason,
        failureRetryable: r.retryable === true,
        detail: { seq, ...detail },
        seq,
        traceparent: r.traceparent,
      });
      this.d.outbox.post(records, 'reject outcome', { trace_id: head.message.trace_id, message_id: messageId });
      return 'done';
    }
    recordDispatchSpan(this.tracer, head, agent, 'reject', { seq, error: { code: 3003, codeName: 'AGENT_REJECTED', message: reason } });
    const envelope = envelopeFromMessageJson(head.message);
    // The producer learns of the refusal by a failure receipt (docs/pipeline.md).
    const receipt = receiptRecord(this.d.codec, envelope, { state: 'REJECTED', code: 3003, reason: `${agent}: ${reason}` });
    const records = [this.status('REJECTED', agent, envelope, head, { code: 3003, reason, detail }), ...(receipt ? [receipt] : [])];
    this.d.outbox.post(records, 'REJECTED status', {
      trace_id: envelope.trace_id,
      message_id: messageId,
    });
    this.d.metrics.rejects.inc();
    return 'done';
  }

  /** An answer for a delivery no longer pending: its deadline passed (retried elsewhere) or it was answered before. */
  private late(kind: 'ack' | 'reject', agent: string, seq: number, messageId: string): void {
    this.d.metrics.lateAnswers.inc({ kind });
    this.d.log.debug({ agent_id: agent, seq, message_id: messageId }, `${kind} for a delivery no longer pending (past its deadline or answered); ignored`);
  }

  /**
   * An answer to a message the stuck sweep declared DEAD while it was unanswered (its budget
   * ended; typically the dispatcher was away and the agent resent the answer on reconnecting):
   * the sender was told DEAD, so it stays DEAD — no DELIVERED after it, no retry.
   */
  private ended(kind: 'ack' | 'reject' | 'result', agent: string, seq: number, messageId: string, promotions: readonly Promotion[]): 'gone' {
    this.d.promoted?.(promotions);
    this.d.metrics.lateAnswers.inc({ kind: kind === 'result' ? 'ack' : kind });
    this.d.log.info({ agent_id: agent, seq, message_id: messageId }, `${kind} for a message already declared DEAD past its budget; ignored`);
    return 'gone';
  }

  private headOrLog(text: string, agent: string, messageId: string, seq: number): EntryHead | undefined {
    const head = parseHead(text);
    if (!head) this.d.log.error({ agent_id: agent, message_id: messageId, seq }, 'unreadable buffer entry answered; no status produced');
    return head;
  }

  /**
   * A handler's result for `message_id`. The message must have been delivered to this agent:
   * either still un-acked (`inflightSeq`, then the result also counts as its ack) or acked
   * recently. Resolves once the status (and the correlated reply) are written; returns the
   * reply's message id when one was sent.
   */
  async result(agent: string, token: string, r: ResultInput, inflightSeq?: number): Promise<string | undefined> {
    let ctx: EntryHead | undefined;
    let unacked = false;
    const stored = await this.d.buffer.resultContext(agent, r.message_id);
    if (stored) ctx = parseHead(stored);
    if (!ctx && inflightSeq !== undefined) {
      const entry = await this.d.buffer.peek(agent, inflightSeq);
      const head = entry === undefined ? undefined : parseHead(headOf(entry));
      if (head && head.mid === r.message_id) {
        ctx = head;
        unacked = true;
      }
    }
    if (!ctx)
      throw new ReachError('INVALID_ENVELOPE', `no delivery of ${r.message_id} to ${agent} is waiting for a result`, { details: { field: 'message_id' } });

    const original = envelopeFromMessageJson(ctx.message);
    const resultDetail = r.payload_b64 !== undefined ? { status: r.status, payload_b64: r.payload_b64 } : { status: r.status, payload: r.payload ?? null };
    const out: OutRecord[] = [this.status('DELIVERED', agent, original, ctx, { detail: { result: resultDetail } })];
    let replyId: string | undefined;
    if (original.reply_to) {
      const reply = this.correlatedReply(agent, original, r);
      out.push({
        topic: TOPICS.ingress.name,
        key: reply.session_id ?? reply.message_id,
        value: this.d.codec.encode(INGRESS_SUBJECT, reply),
        // The reply continues the trace: the agent's own context, else the delivery's.
        headers: { 'reach-token': token, ...traceHeader(r.traceparent ?? ctx.tp ?? undefined) },
      });
      replyId = reply.message_id;
    }
    // A result for a delivery not acked yet is its ack too: it leaves the buffer (not replayed).
    let journaled = false;
    if (unacked && inflightSeq !== undefined) {
      const now = Date.now();
      const taken = await this.d.buffer.take(agent, inflightSeq, r.message_id, true, false, now, now);
      if (taken.kind === 'ended') {
        this.ended('result', agent, inflightSeq, r.message_id, taken.promotions);
        return undefined;
      }
      if (taken.kind === 'taken') {
        journaled = true;
        this.d.promoted?.(taken.promotions);
        recordDispatchSpan(this.tracer, ctx, agent, 'result', { seq: inflightSeq });
      } else if ((await this.d.buffer.resultContext(agent, r.message_id)) === null) {
        // Failed between the peek and the take (its deadline passed: retried elsewhere, or DEAD
        // past its budget): a late answer, like a late ack. Producing DELIVERED now would give
        // the message a second outcome. (Acked meanwhile, it has its result context: go on.)
        this.late('ack', agent, inflightSeq, r.message_id);
        return undefined;
      }
    }
    await this.d.outbox.send(out);
    if (journaled) await this.d.buffer.settleAck(r.message_id, settlesLate(ctx.budget_at));
    this.d.metrics.results.inc();
    return replyId;
  }

  private correlatedReply(agent: string, original: Envelope, r: ResultInput): Envelope {
    const body: EnvelopeJson = {
      message_type: 'task_result',
      target_agent_id: original.reply_to,
      correlation_id: original.message_id,
      trace_id: original.trace_id,
      request_id: original.request_id,
      session_id: original.session_id,
      priority: original.priority,
      content_type: r.content_type ?? 'application/json',
      headers: { ...r.headers, [RESULT_STATUS_HEADER]: r.status },
      ...(r.payload_b64 !== undefined ? { payload_b64: r.payload_b64 } : { payload: r.payload ?? null }),
    };
    const reply = envelopeFromJson(body, { producer: agent });
    const invalid = validateEnvelope(reply, { maxPayloadBytes: this.d.maxPayloadBytes });
    if (invalid) throw invalid;
    return reply;
  }
}

function traceHeader(traceparent: string | undefined): Record<string, string> {
  return traceparent ? { traceparent } : {};
}
