import type { AgentRecord, CapabilityMode, Envelope, Presence } from '@reach/envelope';
import { capabilityMatches, hasAllTags, type Address } from './capability.js';
import type { AgentIndex } from './agent-index.js';

/**
 * The candidate filter (R-B2). The circuit and domain checks are hooks so the breaker
 * (R-D8) and security domains (R-A8) can plug in without touching the filter; by default they
 * allow everything.
 */
export interface FilterHooks {
  circuitOpen?(agentId: string): boolean;
  /**
   * An agent whose half-open circuit probe this decision holds (@reach/circuits): when it is a
   * candidate it gets the message, unless the sender's preference or the session decided.
   */
  readonly circuitProbe?: string;
  /** May this message's producer reach this agent (R-A8 security domains)? */
  domainAllowed?(envelope: Envelope, agent: AgentRecord): boolean;
}

/** Why an agent offering the name is not a candidate (counted in the routing trace). */
export type Rejection = 'status' | 'lease' | 'unreachable' | 'reconnecting' | 'mode' | 'tags' | 'excluded' | 'circuit' | 'domain';

export interface FilterInput {
  readonly address: Address;
  readonly mode: CapabilityMode;
  readonly requiredTags: readonly string[];
  readonly exclude: readonly string[];
  readonly envelope: Envelope;
  readonly now: number;
  /** How long an agent whose socket died counts as reconnecting (REACH_WS_RECONNECT_GRACE_MS); 0 = never. */
  readonly reconnectGraceMs?: number;
  readonly hooks?: FilterHooks;
}

export interface FilterResult {
  readonly candidates: AgentRecord[];
  /** Every agent offering the name, candidate or not. */
  readonly considered: number;
  readonly rejected: Partial<Record<Rejection, number>>;
  /**
   * True when the exclusion list would have left no candidate and was dropped: a failover
   * retry goes to another candidate *when one exists* (R-B9), else to the same one again.
   */
  readonly exclusionRelaxed: boolean;
  /**
   * When an agent that would otherwise fit is only away because its socket died less than the
   * reconnect grace ago: the end of the latest such grace (epoch ms), else null.
   */
  readonly reconnectingUntil: number | null;
}

/** An agent the dispatcher can push to: a live WebSocket somewhere, or an HTTP endpoint. */
export function isReachable(agent: AgentRecord, presence: Presence | undefined): boolean {
  return presence?.connected === true || (agent.endpoints.http !== null && agent.endpoints.http !== '');
}

/**
 * The end of an unreachable agent's reconnect grace, when it is still running: its socket died
 * (a disconnected presence) less than `graceMs` ago, so it is expected back — the dispatcher
 * keeps its un-acked deliveries for a replay over that same window.
 */
export function reconnectingUntil(presence: Presence | undefined, graceMs: number, now: number): number | null {
  if (presence === undefined || presence.connected || graceMs <= 0) return null;
  const until = presence.at + graceMs;
  return until > now ? until : null;
}

/**
 * ONLINE (not COOLDOWN or OFFLINE) with an unexpired lease. An agent in COOLDOWN whose circuit is
 * also open counts as a circuit rejection (3001), not a liveness one (2001): an SDK agent that
 * fails its work reports a low health and goes COOLDOWN as its circuit opens, and a sender told
 * "no live agent" about an agent that is registered and connected is misled; CIRCUIT_OPEN says
 * what happened and that it ends (the open period). Found by the Python pre-flight test, where
 * the early heartbeat (load past half) brought the COOLDOWN within a second of the circuit.
 */
export function liveness(agent: AgentRecord, now: number): 'status' | 'lease' | undefined {
  if (agent.status !== 'ONLINE') return 'status';
  if (agent.lease_expires_at <= now) return 'lease';
  return undefined;
}

export function filterCandidates(index: AgentIndex, input: FilterInput): FilterResult {
  const offering = index.withCapability(input.address.name);
  const rejected: Partial<Record<Rejection, number>> = {};
  const reject = (why: Rejection): void => {
    rejected[why] = (rejected[why] ?? 0) + 1;
  };
  const candidates: AgentRecord[] = [];
  const excludedButFit: AgentRecord[] = [];
  let backBy: number | null = null;
  for (const agent of offering) {
    const caps = agent.capabilities.filter((c) => capabilityMatches(c, input.address, input.mode));
    if (caps.length === 0) {
      reject('mode');
      continue;
    }
    if (!caps.some((c) => hasAllTags(c, input.requiredTags))) {
      reject('tags');
      continue;
    }
    const dead = liveness(agent, input.now);
    if (dead) {
      reject(dead === 'status' && agent.status === 'COOLDOWN' && input.hooks?.circuitOpen?.(agent.agent_id) ? 'circuit' : dead);
      continue;
    }
    const presence = index.presenceOf(agent.agent_id);
    if (!isReachable(agent, presence)) {
      const until = reconnectingUntil(presence, input.reconnectGraceMs ?? 0, input.now);
      if (until !== null) backBy = Math.max(backBy ?? 0, until);
      reject(until !== null ? 'reconnecting' : 'unreachable');
      continue;
    }
    if (input.hooks?.circuitOpen?.(agent.agent_id)) {
      reject('circuit');
      continue;
    }
    if (input.hooks?.domainAllowed && !input.hooks.domainAllowed(input.envelope, agent)) {
      reject('domain');
      continue;
    }
    if (input.exclude.includes(agent.agent_id)) {
      reject('excluded');
      excludedButFit.push(agent);
      continue;
    }
    candidates.push(agent);
  }
  if (candidates.length === 0 && excludedButFit.length > 0) {
    return { candidates: excludedButFit, considered: offering.length, rejected, exclusionRelaxed: true, reconnectingUntil: backBy };
  }
  return { candidates, considered: offering.length, rejected, exclusionRelaxed: false, reconnectingUntil: backBy };
}
