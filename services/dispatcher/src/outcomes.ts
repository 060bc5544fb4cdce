import { HAND_BACK_CODE, ReachError, type Logger, ERROR, RESULT_STATUS_HEADER, TOKEN_HEADER, TRACEPARENT_HEADER } from '@reach/core';
import { checkResult, envelopeFromJson, toStorableText, validateEnvelope, type Envelope, type EnvelopeJson, type SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type OutRecord } from '@reach/kafka';
import { receiptRecord, statusRecord } from '@reach/service-kit';
import { NOOP_TRACER, type Tracer } from '@reach/tracing';
import { settlesLate } from './ack-journal.js';
import { answerOutcome, type AnswerFrame, type Found } from './answer-outcome.js';
import { recordDispatchSpan } from './dispatch-span.js';
import { envelopeFromMessageJson, envelopeOfEntry, headOf, parseHead, type EntryHead } from './entry.js';
import type { Failures } from './failures.js';
import type { CircuitRecorder } from './circuit-recorder.js';
import type { DispatcherMetrics } from './metrics.js';
import type { Outbox } from './outbox.js';
import type { Promotion, ReplayBuffer, TakeOutcome } from './replay-buffer.js';
import type { SentLedger } from './sent-ledger.js';

/**
 * What an agent's answer to a delivery does, whichever channel it came over (WebSocket frame
 * or HTTP push response): `ack` → DELIVERED, `reject` → REJECTED 3003 with the agent's own
 * code and reason, `result` → a DELIVERED event carrying the result (the tracker keeps it for
 * HTTP `wait_ms`) and, when the message named a `reply_to`, a correlated `task_result`
 * message produced to reach.ingress.v1 under the agent's token (ingress checks it like any
 * agent message). The buffer entry is removed first: of two concurrent answers only one
 * produces the status. Each answer frees a slot of the agent: what the buffer promoted into it
 * goes to `promoted` (promotions.ts) to be sent. The delivery's DELIVERING event, when this
 * instance sent it and has not produced it yet (sent-ledger.ts), goes out first, in the same
 * produce as the outcome.
 */
const INGRESS_SUBJECT = valueSubject(TOPICS.ingress.name);

export interface ResultInput {
  message_id: string;
  status: 'ok' | 'error';
  payload: unknown;
  payload_b64?: string | undefined;
  content_type?: string | undefined;
  headers?: Record<string, string> | undefined;
  /** The result frame's traceparent: the correlated reply continues that trace context. */
  traceparent?: string | undefined;
  /** An A2A agent's own id of the task that answered (HTTP push to A2A agents): kept in the DELIVERED detail. */
  a2a_task_id?: string | undefined;
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
  /** The deliveries this instance sent whose DELIVERING event is still to be produced. */
  ledger?: Pick<SentLedger, 'take' | 'restore'>;
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

  /** The DELIVERED event of an ack, at the time it was acked. */
  delivered(agent: string, head: EntryHead, at: number): OutRecord {
    return this.status('DELIVERED', agent, envelopeFromMessageJson(head.message), head, {}, at);
  }

  /** What the ack journal produces for a journaled ack: its DELIVERING if still due here, then its DELIVERED. */
  journaled(agent: string, seq: number, head: EntryHead, at: number): OutRecord[] {
    return [...this.deliveringOf(agent, seq), this.delivered(agent, head, at)];
  }

  /** The DELIVERING event of (agent, seq) if this instance sent it and has not produced it yet. */
  private deliveringOf(agent: string, seq: number): OutRecord[] {
    return this.d.ledger?.take(agent, seq) ?? [];
  }

  /** The agent acknowledged delivery `seq`: DELIVERED (its context stays for a result). */
  async ack(agent: string, seq: number, messageId: string): Promise<AnswerOutcome> {
    const ackedAt = Date.now();
    const taken = await this.d.buffer.takeAck(agent, seq, messageId, ackedAt);
    if (taken.kind === 'mismatch') return 'mismatch';
    if (taken.kind !== 'taken') return this.notPending('ack', taken, agent, seq, messageId);
    this.d.promoted?.(taken.promotions);
    const head = this.headOrLog(taken.head, agent, messageId, seq);
    if (!head) return 'done';
    const envelope = envelopeFromMessageJson(head.message);
    // Journaled with the take: settled once DELIVERED is written; if it cannot be (Kafka away,
    // this process killed), the ack journal produces it later (ack-journal.ts).
    const delivering = this.deliveringOf(agent, seq);
    this.d.outbox
      .send([...delivering, this.status('DELIVERED', agent, envelope, head, {}, ackedAt)])
      .then(
        () => this.d.buffer.settleAck(messageId, settlesLate(head.budget_at)),
        (err: unknown) => {
          this.d.ledger?.restore(delivering);
          this.d.log.warn({ err, trace_id: envelope.trace_id, message_id: messageId }, 'DELIVERED not produced yet; the ack journal retries it');
        },
      )
      .catch((err: unknown) => this.d.log.warn({ err, message_id: messageId }, 'could not settle a journaled ack; it is produced again (harmless)'));
    this.delivered1('ack', agent, head, seq);
    return 'done';
  }

  /** The agent refused delivery `seq`: REJECTED with 3003 and its own code and reason. */
  async reject(agent: string, seq: number, messageId: string, r: RejectInput): Promise<AnswerOutcome> {
    const failures = this.d.failures;
    const taken = await this.d.buffer.take(agent, seq, messageId, false, failures !== undefined);
    if (taken.kind === 'mismatch') return 'mismatch';
    if (taken.kind !== 'taken') return this.notPending('reject', taken, agent, seq, messageId);
    this.d.promoted?.(taken.promotions);
    const head = this.headOrLog(headOf(taken.head), agent, messageId, seq);
    if (!head) return 'done';
    // The agent's words are kept, made storable: refusing a reject would lose the refusal.
    const agentReason = r.reason === undefined ? undefined : toStorableText(r.reason);
    const agentCode = typeof r.code === 'string' ? toStorableText(r.code) : r.code;
    const reason = agentReason ?? 'rejected by the agent';
    const detail = { agent_code: agentCode ?? null, agent_reason: agentReason ?? null, retryable: r.retryable ?? null };
    if (failures) {
      // Only an explicit `retryable: true` asks for another attempt; a bare reject is final.
      // Failures records the circuit's failure (countsAgainstAgent agrees with answerOutcome).
      const { records } = await failures.records({
        agent,
        envelope: envelopeOfEntry(taken.head),
        head,
        code: ERROR.AGENT_REJECTED,
        reason,
        failureRetryable: r.retryable === true,
        handedBack: r.retryable === true && agentCode === HAND_BACK_CODE,
        detail: { seq, ...detail },
        seq,
        traceparent: r.traceparent,
      });
      this.d.outbox.post(records, 'reject outcome', { trace_id: head.message.trace_id, message_id: messageId });
      return 'done';
    }
    recordDispatchSpan(this.tracer, head, agent, 'reject', { seq, error: { code: ERROR.AGENT_REJECTED, codeName: 'AGENT_REJECTED', message: reason } });
    const envelope = envelopeFromMessageJson(head.message);
    // The producer learns of the refusal by a failure receipt (docs/pipeline.md).
    const receipt = receiptRecord(this.d.codec, envelope, { state: 'REJECTED', code: ERROR.AGENT_REJECTED, reason: `${agent}: ${reason}` });
    const records = [
      ...this.deliveringOf(agent, seq),
      this.status('REJECTED', agent, envelope, head, { code: ERROR.AGENT_REJECTED, reason, detail }),
      ...(receipt ? [receipt] : []),
    ];
    this.d.outbox.post(records, 'REJECTED status', {
      trace_id: envelope.trace_id,
      message_id: messageId,
    });
    this.d.metrics.rejects.inc();
    return 'done';
  }

  /**
   * The answer that took a pending delivery and made it DELIVERED (an ack, or a result that
   * came first): its span, its count and its circuit success — once per delivery, whichever
   * frame carried it (answer-outcome.ts).
   */
  private delivered1(frame: 'ack' | 'result', agent: string, head: EntryHead, seq: number): void {
    const account = answerOutcome(frame, 'pending');
    recordDispatchSpan(this.tracer, head, agent, frame, { seq });
    this.d.metrics.acks.inc();
    if (account.circuit === 'success') this.d.circuits?.record(agent, true);
  }

  /**
   * A frame that found its delivery no longer pending: a repeat of an answer already counted
   * (nothing happens), or a late answer — its deadline passed (that failure was the attempt's
   * outcome; retried elsewhere) or the stuck sweep declared the message DEAD past its budget
   * while it was unanswered (typically the dispatcher was away and the agent resent the answer
   * on reconnecting: the sender was told DEAD, so it stays DEAD). A late answer is counted
   * once: the take left the answered marker for the frames that follow it.
   */
  private notPending(
    frame: AnswerFrame,
    taken: Exclude<TakeOutcome, { kind: 'taken' | 'mismatch' }>,
    agent: string,
    seq: number | undefined,
    messageId: string,
  ): 'gone' {
    if (taken.kind === 'ended') this.d.promoted?.(taken.promotions);
    const account = answerOutcome(frame, taken.kind);
    const fields = { agent_id: agent, seq, message_id: messageId };
    if (account.late) {
      this.d.metrics.lateAnswers.inc({ kind: frame });
      if (taken.kind === 'ended') this.d.log.info(fields, `${frame} for a message already ended (declared DEAD past its budget, or canceled); ignored`);
      else this.d.log.debug(fields, `${frame} for a delivery no longer pending (past its deadline); ignored`);
    } else this.d.log.debug(fields, `${frame} for a delivery already answered; ignored`);
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
   * reply's message id when one was sent. A repeat of a result already produced (re-sent after
   * a reconnect) is ignored: the reply goes out once.
   */
  async result(agent: string, token: string, r: ResultInput, inflightSeq?: number): Promise<string | undefined> {
    const refused = checkResult(r, this.d.maxPayloadBytes);
    if (refused) return this.refuseResult(agent, r, refused, inflightSeq);
    const stored = await this.d.buffer.resultContext(agent, r.message_id);
    let ctx = stored === null ? undefined : parseHead(stored);
    let found: Found = ctx ? 'awaiting_result' : stored === null ? 'gone' : 'answered';
    if (!ctx && inflightSeq !== undefined) {
      const entry = await this.d.buffer.peek(agent, inflightSeq);
      const head = entry === undefined ? undefined : parseHead(headOf(entry));
      if (head && head.mid === r.message_id) {
        ctx = head;
        found = 'pending';
      }
    }
    if (found === 'answered') {
      this.notPending('result', { kind: 'answered' }, agent, inflightSeq, r.message_id);
      return undefined;
    }
    if (!ctx) {
      // Late (its deadline passed, its context expired), or never delivered here: counted once
      // (the marker makes the ack that follows a repeat), and answered with an error.
      await this.d.buffer.markAnswered(agent, r.message_id, true);
      this.notPending('result', { kind: 'gone' }, agent, inflightSeq, r.message_id);
      throw new ReachError('INVALID_ENVELOPE', `no delivery of ${r.message_id} to ${agent} is waiting for a result`, { details: { field: 'message_id' } });
    }

    const original = envelopeFromMessageJson(ctx.message);
    const resultDetail = r.payload_b64 !== undefined ? { status: r.status, payload_b64: r.payload_b64 } : { status: r.status, payload: r.payload ?? null };
    const detail = { result: resultDetail, ...(r.a2a_task_id ? { a2a_task_id: r.a2a_task_id } : {}) };
    const out: OutRecord[] = [this.status('DELIVERED', agent, original, ctx, { detail })];
    let replyId: string | undefined;
    if (original.reply_to) {
      const reply = this.correlatedReply(agent, original, r);
      out.push({
        topic: TOPICS.ingress.name,
        key: reply.session_id ?? reply.message_id,
        value: this.d.codec.encode(INGRESS_SUBJECT, reply),
        // The reply continues the trace: the agent's own context, else the delivery's.
        headers: { [TOKEN_HEADER]: token, ...traceHeader(r.traceparent ?? ctx.tp ?? undefined) },
      });
      replyId = reply.message_id;
    }
    let delivering: OutRecord[] = [];
    // A result for a delivery not acked yet is its ack too: it leaves the buffer (not replayed),
    // journaled like an ack, and counts as the delivery's outcome exactly like one.
    if (found === 'pending' && inflightSeq !== undefined) {
      const now = Date.now();
      const taken = await this.d.buffer.takeAck(agent, inflightSeq, r.message_id, now);
      if (taken.kind === 'taken') {
        this.d.promoted?.(taken.promotions);
        delivering = this.deliveringOf(agent, inflightSeq);
      } else if (taken.kind === 'answered' && parseHead((await this.d.buffer.resultContext(agent, r.message_id)) ?? '')) {
        found = 'awaiting_result'; // acked meanwhile: a result after its ack
      } else {
        // Failed between the peek and the take (its deadline passed: retried elsewhere, or DEAD
        // past its budget): a late answer. Producing DELIVERED now would give the message a
        // second outcome.
        this.notPending('result', taken.kind === 'mismatch' ? { kind: 'gone' } : taken, agent, inflightSeq, r.message_id);
        return undefined;
      }
    }
    try {
      await this.d.outbox.send([...delivering, ...out]);
    } catch (err) {
      this.d.ledger?.restore(delivering);
      throw err;
    }
    if (found === 'pending' && inflightSeq !== undefined) {
      await this.d.buffer.settleAck(r.message_id, settlesLate(ctx.budget_at));
      this.delivered1('result', agent, ctx, inflightSeq);
    }
    // Its result is out: a second one for the same delivery is a repeat, not another reply.
    await this.d.buffer.markAnswered(agent, r.message_id);
    this.d.metrics.results.inc();
    return replyId;
  }

  /**
   * A result the pipeline cannot carry (over the payload limit, or text PostgreSQL cannot hold)
   * is never dropped: an un-acked delivery is settled as the agent's final refusal (REJECTED
   * 3003, the agent code 4102 or 4101 and the reason saying why), so the sender learns at once
   * instead of waiting out the ack deadline; the agent gets the error (thrown: an `error`
   * frame on a WebSocket, a warning for an HTTP push). A delivery already acked stays
   * DELIVERED, without a result.
   */
  private async refuseResult(agent: string, r: ResultInput, refused: ReachError, inflightSeq: number | undefined): Promise<never> {
    this.d.metrics.refusedResults.inc({ code: String(refused.code) });
    this.d.log.warn({ agent_id: agent, message_id: r.message_id, code: refused.code, err: refused.message }, 'result refused');
    if (inflightSeq !== undefined) {
      await this.reject(agent, inflightSeq, r.message_id, {
        code: refused.code,
        reason: `result refused: ${refused.code} ${refused.codeName}: ${refused.message}`,
        retryable: false,
        traceparent: r.traceparent,
      });
    }
    throw new ReachError(refused.codeName, `result of ${r.message_id} refused: ${refused.message}`, {
      details: { ...refused.details, message_id: r.message_id },
    });
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
  return traceparent ? { [TRACEPARENT_HEADER]: traceparent } : {};
}
