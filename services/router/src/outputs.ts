import { derivedMessageId, ReachError, ERROR } from '@reach/core';
import type { Envelope, RetryRequest, RoutedDelivery, SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type InRecord, type OutRecord } from '@reach/kafka';
import {
  ackDeadlineAt,
  budgetDeadlineAt,
  FANOUT_PARENT,
  fanoutCopy,
  HOLD_REASON_RECONNECTING,
  HOLD_REASON_SATURATED,
  noRouteError,
  type BudgetPolicy,
  type RouteDecision,
  type RouteHints,
} from '@reach/routing';
import { deadLetterRecord, receiptRecord, statusRecord, type AlertInput } from '@reach/service-kit';

const ROUTED_SUBJECT = valueSubject(TOPICS.routed.name);
const RETRY_SUBJECT = valueSubject(TOPICS.retry.name);

/** At most this many fan-out copies are listed in the parent's ROUTED detail. */
const MAX_LISTED_COPIES = 200;

export interface OutputContext {
  readonly codec: SchemaCodec;
  readonly service: string;
  readonly instanceId: string;
  /** REACH_ACK_TIMEOUT_MS: the ack deadline when the envelope gives no timeout_ms. */
  readonly ackTimeoutMs: number;
  /** REACH_SATURATION_RETRY_MS: how long a saturated message is held. */
  readonly saturationRetryMs: number;
  /** REACH_BUDGET_MS / REACH_BUDGET_POLICY: the end of a message's time budget (R-D2); absent = expire_at only. */
  readonly budget?: BudgetPolicy;
  /** Raises an operator alert (throttled); null when suppressed. */
  readonly alert: (input: AlertInput) => OutRecord | null;
}

/** The ReachRule that matched, as far as the records need it. */
export interface MatchedRule {
  readonly name: string;
  readonly fallback: 'notify_admin' | 'queue_task' | 'reject' | null;
}

interface Msg {
  readonly envelope: Envelope;
  readonly hints: RouteHints;
  readonly record: InRecord;
  readonly rule: MatchedRule | null;
}

/** A parked message without expire_at (fallback queue_task, no budget) waits at most this long. */
const PARK_WITHOUT_DEADLINE_MS = 24 * 3600 * 1000;

function passHeaders(record: InRecord): Record<string, string> {
  return record.headers.traceparent ? { traceparent: record.headers.traceparent } : {};
}

function delivery(ctx: OutputContext, m: Msg, envelope: Envelope, agentId: string, parent: string | null, now: number): OutRecord {
  // The ack deadline never outlives the budget: an attempt routed late fails (and dies) in time.
  const budgetAt = ctx.budget ? budgetDeadlineAt(envelope, ctx.budget) : envelope.expire_at;
  const value: RoutedDelivery = {
    message_id: envelope.message_id,
    parent_message_id: parent,
    agent_id: agentId,
    attempt: m.hints.attempt,
    routed_at: now,
    deadline_at: ackDeadlineAt(now, envelope.timeout_ms, ctx.ackTimeoutMs, budgetAt),
    budget_deadline_at: budgetAt,
    rule: m.rule?.name ?? null,
    envelope,
  };
  // Keyed by agent: every delivery to one agent stays in order on one partition.
  return { topic: TOPICS.routed.name, key: agentId, value: ctx.codec.encode(ROUTED_SUBJECT, value), headers: passHeaders(m.record) };
}

/**
 * The records a routing decision produces (docs/pipeline.md, router row). Produced together
 * before the pending record's offset is committed.
 */
export function decisionRecords(ctx: OutputContext, m: Msg, decision: RouteDecision, now: number): OutRecord[] {
  const { codec } = ctx;
  const env = m.envelope;
  const attempt = m.hints.attempt;
  const base = { service: ctx.service, instance: ctx.instanceId, attempt };
  switch (decision.kind) {
    case 'routed': {
      const parent = decision.parentMessageId ?? null;
      return [
        delivery(ctx, m, env, decision.agentId, parent, now),
        statusRecord(codec, { ...base, state: 'ROUTED', envelope: env, agentId: decision.agentId, parentMessageId: parent, detail: decision.trace }, now),
      ];
    }
    case 'fanout': {
      const out: OutRecord[] = [];
      const copies: Array<{ message_id: string; agent_id: string }> = [];
      for (const agentId of decision.agentIds) {
        // The same copies every time this parent is fanned out (its record consumed again).
        const copy = fanoutCopy(env, agentId, derivedMessageId(env.message_id, agentId));
        copies.push({ message_id: copy.message_id, agent_id: agentId });
        out.push(
          delivery(ctx, m, copy, agentId, env.message_id, now),
          statusRecord(
            codec,
            {
              ...base,
              state: 'ROUTED',
              envelope: copy,
              agentId,
              parentMessageId: env.message_id,
              detail: { strategy: 'broadcast', parent_message_id: env.message_id, chosen: agentId },
            },
            now,
          ),
        );
      }
      const listed = { copies: copies.slice(0, MAX_LISTED_COPIES), copies_total: copies.length };
      out.push(
        statusRecord(codec, { ...base, state: 'ROUTED', envelope: env, detail: { ...decision.trace, ...listed } }, now),
        // The parent's part ends here: its deliveries are its copies, each tracked (acked,
        // retried, DEAD) under its own id. Left ROUTED, the stuck sweep declared every publish
        // DEAD 3005 at its budget's end, with a dead letter and a false receipt (issue 25).
        statusRecord(codec, { ...base, state: 'DELIVERED', envelope: env, detail: { fanned_out: listed } }, now),
      );
      return out;
    }
    case 'saturated': {
      if (m.hints.rejectOnSaturation) {
        const error = new ReachError('SATURATED', 'every candidate is above the saturation threshold (the sender asked for QUEUE_REQUEST)');
        return rejected(ctx, m, error, decision.trace, now);
      }
      return held(
        ctx,
        m,
        { code: ERROR.SATURATED, holdReason: HOLD_REASON_SATURATED, why: 'every candidate is saturated', detail: decision.trace },
        now + ctx.saturationRetryMs,
        now,
      );
    }
    case 'no_route': {
      const error = noRouteError(decision);
      const detail = { ...decision.trace, why: decision.why };
      // Only a reconnecting agent is missing: it is expected back within the grace (and its
      // dispatcher keeps the replay for it that long), so the message waits rather than fails.
      if (decision.reconnectingUntil !== undefined && decision.reconnectingUntil > now && error.codeName === 'NO_ROUTE') {
        const notBefore = Math.min(now + ctx.saturationRetryMs, decision.reconnectingUntil);
        const why = 'the agent that would take it is reconnecting';
        return held(
          ctx,
          m,
          {
            code: error.code,
            holdReason: HOLD_REASON_RECONNECTING,
            why,
            detail: { ...detail, reconnecting_until: new Date(decision.reconnectingUntil).toISOString() },
          },
          notBefore,
          now,
        );
      }
      // A domain refusal is a policy answer, not a missing agent: no fallback, no parking.
      if (error.codeName === 'DOMAIN_DENIED') return rejected(ctx, m, error, detail, now);
      const fallback = m.rule?.fallback ?? null;
      const parkUntil = parkDeadline(ctx, env, fallback, now);
      const out = parkUntil !== null ? parked(ctx, m, error, decision, parkUntil, now) : rejected(ctx, m, error, detail, now);
      if (fallback === 'notify_admin') {
        const alert = ctx.alert({
          kind: 'NO_AVAILABLE_AGENT',
          severity: 'P2',
          service: ctx.service,
          summary:
            `no available agent for ${decision.trace.address || 'the message'} (rule ${m.rule!.name}): ${decision.why}; message ${env.message_id} ` +
            (parkUntil !== null ? `is parked until an agent appears or ${new Date(parkUntil).toISOString()}` : `was rejected with ${error.code}`) +
            ' — start or repair an agent that offers it',
          message_id: env.message_id,
          trace_id: env.trace_id,
          capability: env.capability ?? env.topic ?? env.target_agent_id,
          rule: m.rule!.name,
          labels: { code: String(error.code) },
        });
        if (alert) out.push(alert);
      }
      return out;
    }
    case 'expired': {
      const error = new ReachError('EXPIRED', `expired at ${new Date(env.expire_at ?? now).toISOString()} before it could be routed`);
      const out: OutRecord[] = [
        statusRecord(codec, { ...base, state: 'DEAD', envelope: env, parentMessageId: parentOf(env), code: error.code, reason: error.message }, now),
        deadLetterRecord(codec, { service: ctx.service, error, record: m.record, envelope: env, reason: 'EXPIRED', attempts: attempt }, now),
      ];
      const receipt = receiptRecord(codec, env, { state: 'DEAD', code: error.code, reason: error.message }, now);
      if (receipt) out.push(receipt);
      return out;
    }
  }
}

/** The PENDING event of a message that waits (held on reach.retry.v1, or parked): why, and until when. */
function waitingStatus(ctx: OutputContext, m: Msg, code: number, reason: string, detail: object, now: number): OutRecord {
  const env = m.envelope;
  return statusRecord(
    ctx.codec,
    {
      service: ctx.service,
      instance: ctx.instanceId,
      attempt: m.hints.attempt,
      state: 'PENDING',
      envelope: env,
      parentMessageId: parentOf(env),
      code,
      reason,
      detail,
    },
    now,
  );
}

interface Hold {
  readonly code: number;
  /** The RetryRequest reason that marks it a hold, not a failed attempt (@reach/routing isHold). */
  readonly holdReason: string;
  readonly why: string;
  readonly detail: object;
}

/**
 * Held on reach.retry.v1 and routed again, as the same attempt, at `notBefore`: nothing was
 * delivered, nothing failed. The status says PENDING with why it waits.
 */
function held(ctx: OutputContext, m: Msg, hold: Hold, notBefore: number, now: number): OutRecord[] {
  const env = m.envelope;
  const request: RetryRequest = {
    message_id: env.message_id,
    attempt: m.hints.attempt,
    not_before: notBefore,
    code: hold.code,
    reason: hold.holdReason,
    failed_agent_id: null,
    exclude_agent_ids: [...m.hints.excludeAgents],
    first_attempt_at: env.created_at,
    envelope: env,
  };
  return [
    { topic: TOPICS.retry.name, key: env.message_id, value: ctx.codec.encode(RETRY_SUBJECT, request), headers: passHeaders(m.record) },
    waitingStatus(ctx, m, hold.code, `held: ${hold.why}`, { ...hold.detail, reason: hold.holdReason, not_before: new Date(notBefore).toISOString() }, now),
  ];
}

/**
 * Until when a message nobody can take now is parked for the dead-letter service to redrive
 * (R-B10); null = rejected now. `reject` never parks; `queue_task` always parks, within
 * its expire_at, else its time budget, else a day; without a rule, a message parks only when it
 * has an expire_at (the sender said it may wait).
 */
function parkDeadline(ctx: OutputContext, env: Envelope, fallback: MatchedRule['fallback'], now: number): number | null {
  if (fallback === 'reject') return null;
  if (env.expire_at !== null) return env.expire_at > now ? env.expire_at : null;
  if (fallback !== 'queue_task') return null;
  return (ctx.budget ? budgetDeadlineAt(env, ctx.budget) : null) ?? now + PARK_WITHOUT_DEADLINE_MS;
}

/** Parked: the dead-letter service keeps it and redrives it when a matching agent appears, or lets it expire. The message itself is still PENDING. */
function parked(
  ctx: OutputContext,
  m: Msg,
  error: ReachError,
  decision: Extract<RouteDecision, { kind: 'no_route' }>,
  until: number,
  now: number,
): OutRecord[] {
  const env = m.envelope;
  // The stored copy carries the deadline, so the sweep can expire it and a redrive keeps it.
  const stored = env.expire_at === null ? { ...env, expire_at: until } : env;
  return [
    deadLetterRecord(
      ctx.codec,
      { service: ctx.service, error, record: m.record, envelope: stored, reason: 'NO_ROUTE', attempts: m.hints.attempt, history: decision.trace },
      now,
    ),
    waitingStatus(ctx, m, error.code, 'parked', { ...decision.trace, why: decision.why, parked_until: new Date(until).toISOString() }, now),
  ];
}

function parentOf(env: Envelope): string | null {
  return env.headers[FANOUT_PARENT] ?? null;
}

function rejected(ctx: OutputContext, m: Msg, error: ReachError, detail: unknown, now: number): OutRecord[] {
  const env = m.envelope;
  const out: OutRecord[] = [
    statusRecord(
      ctx.codec,
      {
        service: ctx.service,
        instance: ctx.instanceId,
        attempt: m.hints.attempt,
        state: 'REJECTED',
        envelope: env,
        parentMessageId: parentOf(env),
        code: error.code,
        reason: error.message,
        detail,
      },
      now,
    ),
  ];
  const receipt = receiptRecord(ctx.codec, env, { state: 'REJECTED', code: error.code, reason: error.message }, now);
  if (receipt) out.push(receipt);
  return out;
}
