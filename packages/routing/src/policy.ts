import type { AgentRecord, Envelope } from '@reach/envelope';
import { parseAddress } from './capability.js';

/**
 * How one message is dispatched among its candidates: the default, or what the matching
 * ReachRule (R-B11, @reach/rules) asks for. The router turns a matched rule into a policy;
 * routing itself knows nothing about rule files.
 */
export type Dispatch = 'weighted' | 'random' | 'sticky' | 'broadcast';

export interface RoutePolicy {
  /** Name of the rule that set this policy; null for the default. */
  readonly rule: string | null;
  readonly dispatch: Dispatch;
  /**
   * Which message field binds the message to an agent (sticky dispatch): an envelope field
   * name or `headers.<name>`. Null = no stickiness.
   */
  readonly stickyBy: string | null;
}

/** Without a rule: the best score, and a session (if any) sticks to its agent (R-B6). */
export const DEFAULT_POLICY: RoutePolicy = { rule: null, dispatch: 'weighted', stickyBy: 'session_id' };

const STICKY_FIELDS = ['session_id', 'correlation_id', 'producer', 'trace_id', 'request_id', 'idempotency_key'] as const;

/** The value a message is made sticky by; null when the message has none (→ no stickiness). */
export function stickyValue(envelope: Envelope, stickyBy: string | null): string | null {
  if (stickyBy === null) return null;
  if (stickyBy.startsWith('headers.')) return envelope.headers[stickyBy.slice('headers.'.length)] || null;
  if ((STICKY_FIELDS as readonly string[]).includes(stickyBy)) return (envelope[stickyBy as (typeof STICKY_FIELDS)[number]] as string | null) || null;
  return null;
}

/**
 * The facts a rule's `when` is matched against (same shape as @reach/rules' RuleInput):
 * target_role is the addressed capability's name (without @major) or the topic; the source
 * roles are the producer's capability names and its agent type, when it is registered.
 */
export interface RuleFacts {
  message_type: string;
  target_role: string | null;
  source_roles: string[];
  tags: readonly string[];
}

export function ruleFactsOf(envelope: Envelope, producer: AgentRecord | undefined): RuleFacts {
  const target = envelope.capability !== null ? parseAddress(envelope.capability).name : envelope.topic;
  const roles = producer ? [...new Set([producer.agent_type, ...producer.capabilities.map((c) => c.name)])] : [];
  return { message_type: envelope.message_type, target_role: target, source_roles: roles, tags: envelope.tags };
}
