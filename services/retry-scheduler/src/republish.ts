import type { RetryRequest, SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type InRecord, type OutRecord } from '@reach/kafka';
import { ReachError, TRACEPARENT_HEADER } from '@reach/core';
import { budgetDeadlineAt, FANOUT_PARENT, isHold, republishAttempt, republishHeaders, type BudgetPolicy } from '@reach/routing';
import { deadLetterRecord, receiptRecord, statusRecord } from '@reach/service-kit';

const PENDING_SUBJECT = valueSubject(TOPICS.pending.name);

export interface RepublishContext {
  readonly codec: SchemaCodec;
  readonly service: string;
  readonly instanceId: string;
  /** REACH_BUDGET_MS / REACH_BUDGET_POLICY: a request due after its message's budget is not re-published. */
  readonly budget?: BudgetPolicy;
}

/**
 * A request that comes due after its message's budget (or expire_at) ended is not routed
 * again: the message is DEAD (3005 BUDGET_EXCEEDED, 3006 EXPIRED) with a DLQ entry and a
 * failure receipt (R-D2). Undefined when the message is still within its budget.
 */
export function outOfBudget(ctx: RepublishContext, req: RetryRequest, record: InRecord, now: number): OutRecord[] | undefined {
  if (!ctx.budget) return undefined;
  const env = req.envelope;
  const deadline = budgetDeadlineAt(env, ctx.budget);
  if (now < deadline) return undefined;
  const expired = env.expire_at !== null && now >= env.expire_at;
  const error = expired
    ? new ReachError('EXPIRED', `expired at ${new Date(env.expire_at!).toISOString()} while waiting for attempt ${republishAttempt(req)}`)
    : new ReachError('BUDGET_EXCEEDED', `the time budget ended at ${new Date(deadline).toISOString()} while waiting for attempt ${republishAttempt(req)}`);
  const parent = env.headers[FANOUT_PARENT] ?? null;
  const history = { waiting_attempt: republishAttempt(req), last_code: req.code, last_reason: req.reason, failed_agent_id: req.failed_agent_id };
  const out: OutRecord[] = [
    statusRecord(
      ctx.codec,
      {
        state: 'DEAD',
        envelope: env,
        service: ctx.service,
        instance: ctx.instanceId,
        attempt: req.attempt,
        parentMessageId: parent,
        code: error.code,
        reason: error.message,
        detail: history,
      },
      now,
    ),
    deadLetterRecord(ctx.codec, { service: ctx.service, error, record, envelope: env, attempts: isHold(req) ? req.attempt : req.attempt + 1, history }, now),
  ];
  const receipt = receiptRecord(ctx.codec, env, { state: 'DEAD', code: error.code, reason: error.message }, now);
  if (receipt) out.push(receipt);
  return out;
}

/**
 * A due RetryRequest goes back to reach.pending.v1 exactly as ingress would have written it
 * (key session_id ?? message_id, so a session keeps its partition), with the attempt number and
 * the agents to avoid as Kafka headers. A retry of a failed attempt also opens the new attempt
 * on the timeline with a PENDING status; a saturation hold does not (the router already said
 * PENDING 2002 for this same attempt, and nothing failed). The pending record carries
 * `traceparent` (the retry-wait span's when tracing is on, else the request's own, unchanged).
 */
export function republish(
  ctx: RepublishContext,
  req: RetryRequest,
  record: InRecord,
  now: number = Date.now(),
  traceparent: string | undefined = record.headers[TRACEPARENT_HEADER],
): OutRecord[] {
  const dead = outOfBudget(ctx, req, record, now);
  if (dead) return dead;
  const env = req.envelope;
  const out: OutRecord[] = [
    {
      topic: TOPICS.pending.name,
      key: env.session_id ?? env.message_id,
      value: ctx.codec.encode(PENDING_SUBJECT, env),
      headers: republishHeaders(req, traceparent),
    },
  ];
  if (!isHold(req)) {
    out.push(
      statusRecord(
        ctx.codec,
        {
          state: 'PENDING',
          envelope: env,
          service: ctx.service,
          instance: ctx.instanceId,
          attempt: republishAttempt(req),
          parentMessageId: env.headers[FANOUT_PARENT] ?? null,
          reason: 'retry',
          detail: {
            retry_of_attempt: req.attempt,
            code: req.code,
            reason: req.reason,
            failed_agent_id: req.failed_agent_id,
            exclude_agent_ids: req.exclude_agent_ids,
            not_before: new Date(req.not_before).toISOString(),
          },
        },
        now,
      ),
    );
  }
  return out;
}
