import { ReachError } from '@reach/core';
import type { RouteDecision } from './route.js';

/**
 * NO_ROUTE, or CIRCUIT_OPEN (3001) when agents passed every other check but all had an open
 * circuit (R-D8): the circuit check runs after liveness and reachability, so a circuit
 * rejection means an otherwise usable agent was there. DOMAIN_DENIED (2003) when the only
 * agents that could take it are in a security domain no grant opens.
 */
export function noRouteError(decision: Extract<RouteDecision, { kind: 'no_route' }>): ReachError {
  const open = decision.trace.rejected?.circuit ?? 0;
  if (open > 0)
    return new ReachError('CIRCUIT_OPEN', `${decision.why}: ${open === 1 ? "the only candidate's circuit is" : `all ${open} candidates' circuits are`} open`);
  const denied = decision.trace.rejected?.domain ?? 0;
  if (denied > 0) {
    const which = denied === 1 ? 'the only agent that could take it is' : `all ${denied} agents that could take it are`;
    return new ReachError('DOMAIN_DENIED', `${decision.why}: ${which} in another security domain and no grant allows it`);
  }
  return new ReachError('NO_ROUTE', decision.why);
}
