import type { CircuitRecorder } from './circuit-recorder.js';
import { ReachError, errorInfo, type ErrorName, type Logger, ERROR, type CodeOf } from '@reach/core';
import type { Envelope, RetryRequest, SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type OutRecord } from '@reach/kafka';
import { budgetDeadlineAt, decideAfterFailure, type BudgetPolicy, type FailureDecision, type RetryPolicy } from '@reach/routing';
import { deadLetterRecord, receiptRecord, statusRecord } from '@reach/service-kit';
import { ENDED_MESSAGES, type Redis } from '@reach/store';
import { NOOP_TRACER, type Tracer } from '@reach/tracing';
import { recordDispatchSpan } from './dispatch-span.js';
import { sourceOfHead, type EntryHead } from './entry.js';
import type { DispatcherMetrics } from './metrics.js';
import type { SentLedger } from './sent-ledger.js';

/**
 * A failed attempt (its ack deadline passed: 3002, the agent rejected it: 3003, or it waited
 * for a free slot of a saturated agent until its budget or expiry ran out: 2002) becomes
 * either a retry — a RetryRequest on reach.retry.v1 with `not_before` = now + backoff and every
 * agent that failed this message so far in `exclude_agent_ids` (failover, R-B9) — or an
 * end: REJECTED 3003 for an agent's final refusal, DEAD 3004/3005/3006 when attempts, budget or
 * expiry are spent (`decideAfterFailure`). Ends come with a DLQ entry (the envelope and the
 * history of attempts) and a failure receipt to the producer.
 *
 * The history of a message's failed attempts (agent, code, reason, time) is kept in Redis
 * (`reach:att:<message_id>`): failures of one message happen one after another on whichever
 * dispatcher instance sees them, and the next decision needs all of them. It is kept while
 * another failure can come — until the message's budget ends, plus a margin for the stuck sweep
 * and late answers (historyTtlS) — not a whole day: at 3 % failures a day-long TTL held
 * 0.5 million histories at 200 msg/s (`pnpm soak`, 6 December: the one Redis family still
 * growing after an hour).
 */
const RETRY_SUBJECT = valueSubject(TOPICS.retry.name);
/** The longest a history is kept (a message without a budget end), and the margin past its budget. */
const HISTORY_MAX_TTL_S = 86_400;
const HISTORY_MARGIN_S = 600;

/** How long a history written at `now` is kept: to the budget's end plus the margin, within [margin, a day]. */
export function historyTtlS(budgetAt: number, now: number): number {
  if (!Number.isFinite(budgetAt)) return HISTORY_MAX_TTL_S;
  const left = Math.ceil((budgetAt - now) / 1000);
  return Math.min(HISTORY_MAX_TTL_S, Math.max(0, left) + HISTORY_MARGIN_S);
}

export interface AttemptRecord {
  attempt: number;
  agent_id: string;
  code: number;
  reason: string;
  at: string;
}

export interface AttemptFailure {
  agent: string;
  /** The delivered envelope, payload included. */
  envelope: Envelope;
  head: EntryHead;
  /** 3002 no ack in time, 1002 the agent's connection died (and it did not return), 3003 rejected, 2002 waited out. */
  code: CodeOf<'ACK_TIMEOUT' | 'CONNECTION_CLOSED' | 'AGENT_REJECTED' | 'SATURATED'>;
  reason: string;
  /** False for an agent's `retryable: false` reject. */
  failureRetryable: boolean;
  /**
   * Work the agent handed back rather than failed: a retryable reject whose own code is 2002
   * (SATURATED: it never started the work, being stopping or full, as the SDKs do on shutdown),
   * or a delivery left unanswered when the agent closed its socket itself with 1000 after its
   * graceful stop. Retried like any failed attempt, but not the agent failing.
   */
  handedBack?: boolean;
  detail?: Record<string, unknown>;
  /** The failed delivery's seq, when known (span attribute). */
  seq?: number | undefined;
  /** A reject frame's traceparent; else the retry continues the delivery's (head.tp). */
  traceparent?: string | undefined;
  /**
   * Settle this attempt only if it has not failed before: a routed record consumed again (a
   * retried batch, a restart before its commit) must not end its message twice.
   */
  oncePerAttempt?: boolean;
}

export interface FailuresDeps {
  codec: SchemaCodec;
  service: string;
  instance: string;
  redis: Redis;
  retry: RetryPolicy;
  budget: BudgetPolicy;
  metrics: DispatcherMetrics;
  log: Logger;
  /** Missed deadlines and retryable rejects count against the agent's circuit; a final reject is an answer. */
  circuits?: CircuitRecorder;
  /** Records the failed attempt's dispatch span (dispatch-span.ts). */
  tracer?: Tracer;
  /** The deliveries this instance sent whose DELIVERING event is still to be produced. */
  ledger?: Pick<SentLedger, 'take'>;
}

/**
 * Whether a failed attempt counts against its agent's circuit. A wait for a slot (2002) is the
 * agent being busy, not failing. A missed ack deadline at the message's budget end is the
 * message running out of time — it came late (a broker restart upstream, a backlog) or was
 * never sent, having too little budget left — not the agent failing: counted, a broker restart
 * under load opened every agent's circuit at once and the next 32,374 messages were REJECTED
 * 3001, no live agent (`pnpm chaos --long`). A missed deadline within the budget (the ack
 * window), a lost connection and a retryable reject count — except a hand-back (a retryable
 * reject with the agent's code 2002): counted, every graceful SDK shutdown under load opened the
 * stopping agent's circuit with the rejects of its queued work (`pnpm soak`, 5 December).
 */
export function countsAgainstAgent(f: Pick<AttemptFailure, 'code' | 'failureRetryable' | 'handedBack'>, budgetAt: number | null, now: number): boolean {
  if (f.code === ERROR.SATURATED || f.handedBack === true) return false;
  if (f.code === ERROR.ACK_TIMEOUT) return budgetAt === null || now < budgetAt;
  return f.code === ERROR.CONNECTION_CLOSED || f.failureRetryable;
}

/**
 * An agent's final (non-retryable) reject is an answer: the handler refused the input for good,
 * which is the agent working as it should (a NonRetryableError for bad input). The circuit counts
 * it like an ack, never as a failure — counted as one, an agent that refuses bad input would be
 * ejected for doing its job.
 */
export function isFinalRefusal(f: Pick<AttemptFailure, 'code' | 'failureRetryable'>): boolean {
  return f.code === ERROR.AGENT_REJECTED && !f.failureRetryable;
}

export function historyKey(messageId: string): string {
  return `reach:att:${messageId}`;
}

export class Failures {
  constructor(private readonly d: FailuresDeps) {}

  /**
   * Appends the attempt to the message's history and returns the whole history, and whether
   * the message is marked ended (ENDED_MESSAGES) — read in the same MULTI, so no extra trip.
   */
  private async remember(messageId: string, rec: AttemptRecord, ttlS: number): Promise<{ history: AttemptRecord[]; ended: boolean }> {
    const key = historyKey(messageId);
    let res: Array<[Error | null, unknown]> | null;
    try {
      res = await this.d.redis.multi().rpush(key, JSON.stringify(rec)).expire(key, ttlS).lrange(key, 0, -1).zscore(ENDED_MESSAGES, messageId).exec();
    } catch (err) {
      throw new ReachError('DEPENDENCY_UNAVAILABLE', `redis attempt history failed: ${(err as Error).message}`, { cause: err });
    }
    const [, , [err, list] = [null, []], [endedErr, endedAt] = [null, null]] = res ?? [];
    if (err ?? endedErr)
      throw new ReachError('DEPENDENCY_UNAVAILABLE', `redis attempt history failed: ${(err ?? endedErr)!.message}`, { cause: err ?? endedErr });
    const history = (list as string[]).flatMap((s) => {
      try {
        return [JSON.parse(s) as AttemptRecord];
      } catch {
        return [];
      }
    });
    return { history, ended: endedAt !== null && endedAt !== undefined };
  }

  /**
   * The records that settle a failed attempt (produced by the caller, acks=-1) — after the
   * delivery's DELIVERING event when this instance sent it (`seq`) and has not produced it yet
   * (sent-ledger.ts), so that both are written in the same produce.
   */
  async records(f: AttemptFailure, now: number = Date.now()): Promise<{ records: OutRecord[]; decision: FailureDecision | { kind: 'ended' } }> {
    const env = f.envelope;
    const budgetAt = f.head.budget_at ?? budgetDeadlineAt(env, this.d.budget);
    if (countsAgainstAgent(f, budgetAt, now)) this.d.circuits?.record(f.agent, false);
    else if (isFinalRefusal(f)) this.d.circuits?.record(f.agent, true);
    const attempt = f.head.attempt;
    recordDispatchSpan(
      this.d.tracer ?? NOOP_TRACER,
      f.head,
      f.agent,
      f.code === ERROR.ACK_TIMEOUT
        ? 'timeout'
        : f.code === ERROR.CONNECTION_CLOSED
          ? 'connection_lost'
          : f.code === ERROR.SATURATED
            ? 'wait_expired'
            : 'reject',
      { seq: f.seq, error: { code: f.code, codeName: errorInfo(f.code).name, message: f.reason } },
      now,
    );
    const { history, ended } = await this.remember(
      env.message_id,
      {
        attempt,
        agent_id: f.agent,
        code: f.code,
        reason: f.reason,
        at: new Date(now).toISOString(),
      },
      historyTtlS(budgetAt, now),
    );
    if (f.oncePerAttempt === true && history.filter((h) => h.attempt === attempt).length > 1) {
      this.d.log.info({ trace_id: env.trace_id, message_id: env.message_id, agent_id: f.agent, attempt }, 'attempt already failed once; nothing more to do');
      return { records: [], decision: { kind: 'ended' } };
    }
    if (ended) {
      // Canceled by its sender (A2A CancelTask) or declared DEAD by the stuck sweep: its end is
      // recorded already. A retry, a DEAD of its own, a dead letter or a receipt now would give
      // the message a second outcome (a canceled task in the DLQ, its sender told DEAD 3005).
      this.d.log.info(
        { trace_id: env.trace_id, message_id: env.message_id, agent_id: f.agent, attempt, code: f.code },
        'attempt of a message already ended failed; nothing more to do',
      );
      return { records: [], decision: { kind: 'ended' } };
    }
    const decision = decideAfterFailure(
      {
        attempt,
        envelopeRetryable: env.retryable,
        failureRetryable: f.failureRetryable,
        messageType: env.message_type,
        expireAt: env.expire_at,
        budgetDeadline: budgetAt,
        now,
      },
      this.d.retry,
    );
    const base = { envelope: env, service: this.d.service, instance: this.d.instance, parentMessageId: f.head.parent, agentId: f.agent };
    const fields = { trace_id: env.trace_id, message_id: env.message_id, agent_id: f.agent, attempt, code: f.code };
    const out: OutRecord[] = [];
    switch (decision.kind) {
      case 'retry': {
        const exclude = [...new Set(history.map((h) => h.agent_id))];
        const req: RetryRequest = {
          message_id: env.message_id,
          attempt,
          not_before: decision.notBefore,
          code: f.code,
          reason: f.reason.slice(0, 1000),
          failed_agent_id: f.agent,
          exclude_agent_ids: exclude,
          first_attempt_at: env.created_at,
          envelope: env,
        };
        out.push(
          { topic: TOPICS.retry.name, key: env.message_id, value: this.d.codec.encode(RETRY_SUBJECT, req), headers: retryHeaders(f) },
          statusRecord(
            this.d.codec,
            {
              ...base,
              state: 'PENDING',
              attempt: decision.nextAttempt,
              code: f.code,
              reason: `attempt ${attempt} failed (${errorInfo(f.code).name}): ${f.reason}`.slice(0, 1000),
              detail: {
                ...f.detail,
                failed_attempt: attempt,
                failed_agent_id: f.agent,
                exclude_agent_ids: exclude,
                delay_ms: decision.delayMs,
                not_before: new Date(decision.notBefore).toISOString(),
              },
            },
            now,
          ),
        );
        this.d.metrics.retriesScheduled.inc({ code: String(f.code) });
        this.d.log.info({ ...fields, not_before: decision.notBefore, exclude_agent_ids: exclude }, 'attempt failed; retry scheduled');
        break;
      }
      case 'rejected': {
        const error = new ReachError('AGENT_REJECTED', `${f.agent}: ${f.reason}`);
        out.push(
          statusRecord(this.d.codec, { ...base, state: 'REJECTED', attempt, code: ERROR.AGENT_REJECTED, reason: f.reason, detail: f.detail }, now),
          deadLetterRecord(
            this.d.codec,
            {
              service: this.d.service,
              error,
              envelope: env,
              reason: 'REJECTED',
              attempts: attempt + 1,
              history,
              sourceTopic: TOPICS.routed.name,
              ...sourceOfHead(f.head),
            },
            now,
          ),
        );
        const receipt = receiptRecord(this.d.codec, env, { state: 'REJECTED', code: ERROR.AGENT_REJECTED, reason: error.message }, now);
        if (receipt) out.push(receipt);
        this.d.metrics.rejects.inc();
        this.d.log.info(fields, 'delivery rejected by the agent (not retryable)');
        break;
      }
      case 'dead': {
        const name = errorInfo(decision.code).name as ErrorName;
        const error = new ReachError(name, `${decision.why}; last failure: ${errorInfo(f.code).name} from ${f.agent}: ${f.reason}`.slice(0, 2000));
        out.push(
          statusRecord(
            this.d.codec,
            { ...base, state: 'DEAD', attempt, code: decision.code, reason: error.message, detail: { ...f.detail, attempts: history } },
            now,
          ),
          deadLetterRecord(
            this.d.codec,
            { service: this.d.service, error, envelope: env, attempts: attempt + 1, history, sourceTopic: TOPICS.routed.name, ...sourceOfHead(f.head) },
            now,
          ),
        );
        const receipt = receiptRecord(this.d.codec, env, { state: 'DEAD', code: decision.code, reason: error.message }, now);
        if (receipt) out.push(receipt);
        this.d.metrics.deaths.inc({ code: String(decision.code) });
        this.d.log.info({ ...fields, dead_code: decision.code }, 'message dead');
        break;
      }
    }
    if (f.seq !== undefined && this.d.ledger) out.unshift(...this.d.ledger.take(f.agent, f.seq));
    return { records: out, decision };
  }
}

/** The retry continues the failed delivery's trace (R-F1): the retry-scheduler carries it on. */
function retryHeaders(f: AttemptFailure): Record<string, string> {
  const traceparent = f.traceparent ?? f.head.tp ?? undefined;
  return traceparent ? { traceparent } : {};
}
