import type { Envelope } from '@reach/envelope';
import { DEFAULT_POLICY, type Dispatch, type RoutePolicy } from './policy.js';

/**
 * What routing needs of a matched ReachRule (@reach/rules' Rule has this shape): routing knows
 * nothing about rule files, only how a rule dispatches and what it changes on the envelope.
 */
export interface MatchedRuleAction {
  readonly name: string;
  readonly action: {
    readonly dispatch: Dispatch;
    readonly sticky_by?: string | undefined;
    readonly priority?: Envelope['priority'] | undefined;
    readonly timeout_ms?: number | undefined;
  };
}

/** How a matched rule dispatches (R-B11); no rule → the default policy. */
export function policyOf(rule: MatchedRuleAction | null): RoutePolicy {
  if (rule === null) return DEFAULT_POLICY;
  return { rule: rule.name, dispatch: rule.action.dispatch, stickyBy: rule.action.dispatch === 'sticky' ? (rule.action.sticky_by ?? null) : null };
}

/**
 * The envelope as the rule routes it: the rule's priority lane replaces the sender's (the
 * operator's policy wins), and its timeout_ms applies when the sender gave none (the sender
 * knows its task best). What is routed is what the dispatcher and every retry see.
 */
export function withRuleAction(envelope: Envelope, rule: MatchedRuleAction | null): Envelope {
  if (rule === null) return envelope;
  const { priority, timeout_ms } = rule.action;
  const samePriority = priority === undefined || priority === envelope.priority;
  const keepTimeout = timeout_ms === undefined || envelope.timeout_ms !== null;
  if (samePriority && keepTimeout) return envelope;
  return { ...envelope, ...(samePriority ? {} : { priority }), ...(keepTimeout ? {} : { timeout_ms }) };
}
