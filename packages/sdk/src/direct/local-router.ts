import { ReachError, derivedMessageId, ERROR } from '@reach/core';
import type { Envelope, MessageState } from '@reach/envelope';
import {
  ATTEMPT_HEADER,
  EXCLUDE_HEADER,
  FANOUT_PARENT,
  MemoryStickyStore,
  budgetDeadlineAt,
  domainGate,
  fanoutCopy,
  noRouteError,
  policyOf,
  readHints,
  routeMessage,
  ruleFactsOf,
  withRuleAction,
  type RouteDecision,
  type RouteDeps,
} from '@reach/routing';
import type { Rule, RuleSet } from '@reach/rules';
import type { BusClock } from './clock.js';
import type { LocalConfig } from './local-config.js';
import type { LocalRegistry } from './local-registry.js';
import type { Timeline } from './timeline.js';

export interface RouterDeps {
  config: LocalConfig;
  clock: BusClock;
  registry: LocalRegistry;
  timeline: Timeline;
  rules: () => RuleSet;
  random: () => number;
  /** Hands a routed delivery to the dispatcher. */
  deliver: (agentId: string, envelope: Envelope, attempt: number, parent: string | null) => void;
  /** Sends a failure receipt about `envelope` to its producer. */
  receipt: (envelope: Envelope, outcome: { state: MessageState; code: number; reason: string }) => void;
}

interface Parked {
  envelope: Envelope;
  attempt: number;
  exclude: readonly string[];
  timer: ReturnType<BusClock['after']>;
}

interface Hints {
  attempt: number;
  exclude: readonly string[];
  rejectOnSaturation: boolean;
}

function parentOf(env: Envelope): string | null {
  return env.headers[FANOUT_PARENT] ?? null;
}

/**
 * The router of direct mode (services/router's decisions, without Kafka): the first matching
 * ReachRule, then @reach/routing's routeMessage — exact capability match, the candidate filter
 * with security domains, scoring, stickiness (an in-memory sticky store), saturation holds,
 * fan-out copies — and the same status events, holds, parking and receipts for each decision.
 */
export class LocalRouter {
  private readonly sticky = new MemoryStickyStore();
  private readonly parked = new Map<string, Parked>();

  constructor(private readonly d: RouterDeps) {}

  async route(received: Envelope, attempt: number, exclude: readonly string[] = []): Promise<void> {
    const { d } = this;
    const now = d.clock.now();
    const index = d.registry.index;
    const rule = d.rules().match(ruleFactsOf(received, index.agent(received.producer)));
    const envelope = withRuleAction(received, rule);
    const headers: Record<string, string> = { [ATTEMPT_HEADER]: String(attempt) };
    if (exclude.length > 0) headers[EXCLUDE_HEADER] = exclude.join(',');
    const hints = readHints(headers, envelope);
    const deps: RouteDeps = {
      index,
      config: d.config.routing,
      sticky: this.sticky,
      rng: d.random,
      hooks: { domainAllowed: domainGate(index, d.registry.grants) },
    };
    const decision = await routeMessage(envelope, hints, deps, now, policyOf(rule));
    this.apply(envelope, { attempt, exclude, rejectOnSaturation: hints.rejectOnSaturation }, rule, decision, now);
  }

  /** An agent connected: parked messages are routed again (the dead-letter service's redrive); those still without one park again. */
  redrive(): void {
    const waiting = [...this.parked.values()];
    this.parked.clear();
    for (const p of waiting) {
      this.d.clock.cancel(p.timer);
      void this.route(p.envelope, p.attempt, p.exclude);
    }
  }

  private apply(env: Envelope, hints: Hints, rule: Rule | null, decision: RouteDecision, now: number): void {
    const { attempt, exclude } = hints;
    const { timeline } = this.d;
    const at = new Date(now).toISOString();
    const base = { at, attempt, service: 'router' };
    switch (decision.kind) {
      case 'routed': {
        const parent = decision.parentMessageId ?? null;
        timeline.record(env.message_id, { ...base, state: 'ROUTED', agent_id: decision.agentId, code: null, reason: null, detail: decision.trace, parent });
        this.d.deliver(decision.agentId, env, attempt, parent);
        return;
      }
      case 'fanout': {
        const copies = decision.agentIds.map((agentId) => ({ agentId, copy: fanoutCopy(env, agentId, derivedMessageId(env.message_id, agentId)) }));
        for (const { agentId, copy } of copies) {
          timeline.record(copy.message_id, {
            ...base,
            state: 'ROUTED',
            agent_id: agentId,
            code: null,
            reason: null,
            detail: { strategy: 'broadcast', parent_message_id: env.message_id, chosen: agentId },
            parent: env.message_id,
          });
        }
        const listed = { copies: copies.map((c) => ({ message_id: c.copy.message_id, agent_id: c.agentId })), copies_total: copies.length };
        timeline.record(env.message_id, { ...base, state: 'ROUTED', agent_id: null, code: null, reason: null, detail: { ...decision.trace, ...listed } });
        timeline.record(env.message_id, { ...base, state: 'DELIVERED', agent_id: null, code: null, reason: null, detail: { fanned_out: listed } });
        for (const { agentId, copy } of copies) this.d.deliver(agentId, copy, attempt, env.message_id);
        return;
      }
      case 'saturated': {
        if (hints.rejectOnSaturation) {
          this.reject(
            env,
            attempt,
            new ReachError('SATURATED', 'every candidate is above the saturation threshold (the sender asked for QUEUE_REQUEST)'),
            decision.trace,
          );
          return;
        }
        this.hold(env, attempt, exclude, ERROR.SATURATED, 'every candidate is saturated', decision.trace, now + this.d.config.saturationRetryMs);
        return;
      }
      case 'no_route': {
        const error = noRouteError(decision);
        const detail = { ...decision.trace, why: decision.why };
        if (decision.reconnectingUntil !== undefined && decision.reconnectingUntil > now && error.codeName === 'NO_ROUTE') {
          const notBefore = Math.min(now + this.d.config.saturationRetryMs, decision.reconnectingUntil);
          this.hold(env, attempt, exclude, error.code, 'the agent that would take it is reconnecting', detail, notBefore);
          return;
        }
        if (error.codeName === 'DOMAIN_DENIED') {
          this.reject(env, attempt, error, detail);
          return;
        }
        const until = this.parkDeadline(env, rule?.fallback ?? null, now);
        if (until === null) this.reject(env, attempt, error, detail);
        else this.park(env, attempt, exclude, error, { ...detail, parked_until: new Date(until).toISOString() }, until);
        return;
      }
      case 'expired': {
        const reason = `expired at ${new Date(env.expire_at ?? now).toISOString()} before it could be routed`;
        timeline.record(env.message_id, { ...base, state: 'DEAD', agent_id: null, code: ERROR.EXPIRED, reason, detail: null, parent: parentOf(env) });
        this.d.receipt(env, { state: 'DEAD', code: ERROR.EXPIRED, reason });
        return;
      }
    }
  }

  /** Routed again, as the same attempt, at `notBefore`: nothing was delivered, nothing failed. */
  private hold(env: Envelope, attempt: number, exclude: readonly string[], code: number, why: string, detail: object, notBefore: number): void {
    const now = this.d.clock.now();
    this.d.timeline.record(env.message_id, {
      state: 'PENDING',
      at: new Date(now).toISOString(),
      attempt,
      service: 'router',
      agent_id: null,
      code,
      reason: `held: ${why}`,
      detail: { ...detail, not_before: new Date(notBefore).toISOString() },
      parent: parentOf(env),
    });
    this.d.clock.after(notBefore - now, () => void this.route(env, attempt, exclude));
  }

  private reject(env: Envelope, attempt: number, error: ReachError, detail: unknown): void {
    this.d.timeline.record(env.message_id, {
      state: 'REJECTED',
      at: new Date(this.d.clock.now()).toISOString(),
      attempt,
      service: 'router',
      agent_id: null,
      code: error.code,
      reason: error.message,
      detail,
      parent: parentOf(env),
    });
    this.d.receipt(env, { state: 'REJECTED', code: error.code, reason: error.message });
  }

  /**
   * Until when a message nobody can take now waits for an agent (R-B10); null = rejected now.
   * `reject` never parks; `queue_task` always parks; without a rule, only a message with expire_at.
   */
  private parkDeadline(env: Envelope, fallback: Rule['fallback'], now: number): number | null {
    if (fallback === 'reject') return null;
    if (env.expire_at !== null) return env.expire_at > now ? env.expire_at : null;
    if (fallback !== 'queue_task') return null;
    return budgetDeadlineAt(env, this.d.config.budget);
  }

  private park(env: Envelope, attempt: number, exclude: readonly string[], error: ReachError, detail: object, until: number): void {
    const now = this.d.clock.now();
    this.d.timeline.record(env.message_id, {
      state: 'PENDING',
      at: new Date(now).toISOString(),
      attempt,
      service: 'router',
      agent_id: null,
      code: error.code,
      reason: 'parked',
      detail,
      parent: parentOf(env),
    });
    const timer = this.d.clock.after(until - now, () => {
      this.parked.delete(env.message_id);
      const reason = `parked until ${new Date(until).toISOString()} and no agent took it`;
      this.d.timeline.record(env.message_id, {
        state: 'DEAD',
        at: new Date(this.d.clock.now()).toISOString(),
        attempt,
        service: 'dead-letter',
        agent_id: null,
        code: ERROR.EXPIRED,
        reason,
        detail: null,
        parent: parentOf(env),
      });
      this.d.receipt(env, { state: 'DEAD', code: ERROR.EXPIRED, reason });
    });
    this.parked.set(env.message_id, { envelope: env, attempt, exclude, timer });
  }
}
