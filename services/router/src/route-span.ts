import { ReachError } from '@reach/core';
import { noRouteError, type RouteDecision } from '@reach/routing';
import type { SpanAttributes, SpanError } from '@reach/tracing';

/**
 * What a `route` span says about its decision (R-F1, R-B12): the rule, the strategy, how
 * many candidates there were and which agent was chosen. Ids are fine as span attributes (one
 * span per message); they never become metric labels.
 */
export function routeSpanAttributes(decision: RouteDecision, rule: string | null, attempt: number, messageId: string): SpanAttributes {
  const base = {
    'reach.message_id': messageId,
    'reach.attempt': attempt,
    'reach.route.outcome': decision.kind,
    'reach.route.candidates': decision.candidates,
    'reach.rule': rule,
  };
  switch (decision.kind) {
    case 'routed':
      return { ...base, 'reach.route.strategy': decision.trace.strategy, 'reach.agent_id': decision.agentId };
    case 'fanout':
      return { ...base, 'reach.route.strategy': decision.trace.strategy, 'reach.route.copies': decision.agentIds.length };
    case 'saturated':
    case 'no_route':
      return { ...base, 'reach.route.strategy': decision.trace.strategy };
    case 'expired':
      return base;
  }
}

/** The failure a decision is, for the span's ERROR status; undefined when the message goes on (routed, fanned out, held). */
export function routeSpanError(decision: RouteDecision, rejectOnSaturation: boolean): SpanError | undefined {
  switch (decision.kind) {
    case 'no_route':
      return noRouteError(decision);
    case 'expired':
      return new ReachError('EXPIRED', 'expired before it could be routed');
    case 'saturated':
      return rejectOnSaturation ? new ReachError('SATURATED', 'every candidate is above the saturation threshold') : undefined;
    default:
      return undefined;
  }
}
