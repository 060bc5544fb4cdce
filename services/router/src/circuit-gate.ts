import type { CircuitCache } from '@reach/circuits';
import type { Envelope } from '@reach/envelope';
import { DEFAULT_POLICY, routeMessage, type FilterHooks, type RouteDecision, type RouteDeps, type RouteHints, type RoutePolicy } from '@reach/routing';

/** Agents a decision sends work to. */
function chosenAgents(d: RouteDecision): readonly string[] {
  if (d.kind === 'routed') return [d.agentId];
  if (d.kind === 'fanout') return d.agentIds;
  return [];
}

/**
 * Routing with the circuit filter (R-B2, R-D8, R-D13). The local circuit map answers
 * synchronously: OPEN agents are no candidates, and nothing touches Redis while every circuit
 * is closed (the normal case). Only when the filter meets a HALF_OPEN agent does the decision
 * claim that agent's single probe in Redis (atomic across router instances) and route again
 * with the probe allowed; a probe claimed but not used (the message went elsewhere) is given
 * back at once.
 */
export async function routeWithCircuits(
  envelope: Envelope,
  hints: RouteHints,
  deps: RouteDeps,
  circuits: CircuitCache,
  now: number,
  policy: RoutePolicy = DEFAULT_POLICY,
): Promise<{ decision: RouteDecision; probes: readonly string[] }> {
  if (circuits.size === 0) return { decision: await routeMessage(envelope, hints, deps, now, policy), probes: [] };

  const halfOpen = new Set<string>();
  const hooks: FilterHooks = {
    ...deps.hooks,
    circuitOpen: (agentId) => {
      const v = circuits.verdict(agentId, now);
      if (v === 'half_open') halfOpen.add(agentId);
      return v !== 'closed';
    },
  };
  const first = await routeMessage(envelope, hints, { ...deps, hooks }, now, policy);
  if (halfOpen.size === 0) return { decision: first, probes: [] };

  const claimed: string[] = [];
  const closed = new Set<string>();
  for (const agentId of halfOpen) {
    const res = await circuits.claimProbe(agentId, now);
    if (res === 'CLAIMED') claimed.push(agentId);
    else if (res === 'CLOSED') closed.add(agentId);
  }
  if (claimed.length === 0 && closed.size === 0) return { decision: first, probes: [] };

  const allowed = new Set([...claimed, ...closed]);
  const probeHooks: FilterHooks = {
    ...deps.hooks,
    circuitOpen: (agentId) => !allowed.has(agentId) && circuits.verdict(agentId, now) !== 'closed',
    ...(claimed[0] !== undefined ? { circuitProbe: claimed[0] } : {}),
  };
  const second = await routeMessage(envelope, hints, { ...deps, hooks: probeHooks }, now, policy);
  const used = chosenAgents(second);
  const probes = claimed.filter((id) => used.includes(id));
  await Promise.all(claimed.filter((id) => !used.includes(id)).map((id) => circuits.releaseProbe(id)));
  return { decision: second, probes };
}
