import type { AgentRecord, CapabilityMode, Envelope } from '@reach/envelope';
import { AgentIndex } from './agent-index.js';
import { parseAddress, type Address } from './capability.js';
import { filterCandidates, isReachable, reconnectingUntil, type FilterHooks, type Rejection } from './candidates.js';
import { FANOUT_AGENT, FANOUT_PARENT, type RouteHints } from './hints.js';
import { byScore, scoreCandidates, type ScoredCandidate, type ScoringConfig } from './score.js';
import { DEFAULT_POLICY, stickyValue, type RoutePolicy } from './policy.js';
import { rendezvousPick, stickyKey, type StickyStore } from './sticky.js';
import { traceCandidates, type RouteTrace, type Strategy } from './trace.js';

/** Everything the decision depends on besides the message (REACH_ROUTE_*, REACH_SATURATION, REACH_STICKY_TTL_S). */
export interface RoutingConfig extends ScoringConfig {
  /** Above this many available candidates, pick at random among the best `topK` (R-B4). */
  readonly hotspotCandidates: number;
  readonly topK: number;
  /** Load rate above which a candidate is saturated (R-B7). */
  readonly saturation: number;
  readonly stickyTtlS: number;
  /**
   * An agent whose socket died less than this long ago is expected back (REACH_WS_RECONNECT_GRACE_MS):
   * when it is all that is missing, the message is held, not refused. 0 or absent = refuse at once.
   */
  readonly reconnectGraceMs?: number;
}

export interface RouteDeps {
  readonly index: AgentIndex;
  readonly config: RoutingConfig;
  readonly sticky: StickyStore;
  /** [0, 1) — injected so tests are deterministic. */
  readonly rng: () => number;
  readonly hooks?: FilterHooks;
  /**
   * Deliveries waiting in the dispatcher's lanes for a free slot of this agent (lane-backlog.ts;
   * 0 or undefined: none). The free choice is among the least queued candidates (leastQueued).
   */
  readonly backlog?: (agentId: string) => number;
  /** False for a dry run (`reach rules explain`): sticky bindings are read, never written. */
  readonly bindSticky?: boolean;
}

export type RouteDecision =
  /** expire_at has passed: DEAD 3006. */
  | { readonly kind: 'expired'; readonly candidates: 0 }
  /**
   * Nothing can take it (R-B10). `reconnectingUntil` is set when an agent that would take it
   * is only reconnecting (its socket died within the grace): the caller holds the message until
   * then instead of refusing it.
   */
  | { readonly kind: 'no_route'; readonly why: string; readonly candidates: 0; readonly trace: NoRouteTrace; readonly reconnectingUntil?: number }
  /** Every candidate is above the saturation threshold (R-B7). */
  | { readonly kind: 'saturated'; readonly candidates: number; readonly trace: RouteTrace }
  /** Exactly one agent; `parentMessageId` is set for a retried fan-out copy. */
  | { readonly kind: 'routed'; readonly agentId: string; readonly candidates: number; readonly trace: RouteTrace; readonly parentMessageId?: string }
  /** A topic: one copy per subscriber (R-B8). */
  | { readonly kind: 'fanout'; readonly agentIds: readonly string[]; readonly candidates: number; readonly trace: RouteTrace };

export interface NoRouteTrace {
  strategy: Strategy;
  /** The ReachRule that decided how to dispatch, when one matched. */
  rule?: string;
  address: string;
  /** Agents that offer the name (or the target id when it is registered). */
  considered: number;
  rejected?: Partial<Record<Rejection, number>>;
}

/**
 * Decides where one message goes. Pure apart from the injected sticky store: no Kafka, no
 * encoding, no clock (the caller passes `now`). The router service turns the decision into
 * records (RoutedDelivery, status, retry, DLQ, receipt).
 */
export async function routeMessage(
  envelope: Envelope,
  hints: RouteHints,
  deps: RouteDeps,
  now: number,
  policy: RoutePolicy = DEFAULT_POLICY,
): Promise<RouteDecision> {
  const decision = await decide(envelope, hints, deps, now, policy);
  if (policy.rule === null || decision.kind === 'expired') return decision;
  return { ...decision, trace: { ...decision.trace, rule: policy.rule } } as RouteDecision;
}

async function decide(envelope: Envelope, hints: RouteHints, deps: RouteDeps, now: number, policy: RoutePolicy): Promise<RouteDecision> {
  if (envelope.expire_at !== null && envelope.expire_at <= now) return { kind: 'expired', candidates: 0 };
  // A retried copy of a fan-out (topic, or a capability broadcast by a rule) goes back to its own agent.
  const copyAgent = envelope.headers[FANOUT_AGENT];
  const parent = envelope.headers[FANOUT_PARENT];
  if (copyAgent && parent) return routeToAgent(envelope, copyAgent, 'fanout_copy', deps, now, parent);
  if (envelope.topic !== null) return fanOut(envelope, parseAddress(envelope.topic), 'subscribe', hints, deps, now);
  if (envelope.target_agent_id !== null) return routeToAgent(envelope, envelope.target_agent_id, 'target', deps, now);
  if (envelope.capability !== null) {
    if (policy.dispatch === 'broadcast') return fanOut(envelope, parseAddress(envelope.capability), 'handle', hints, deps, now);
    return routeToCapability(envelope, envelope.capability, hints, deps, now, policy);
  }
  return {
    kind: 'no_route',
    why: 'the message names no capability, topic or target agent',
    candidates: 0,
    trace: { strategy: 'weighted', address: '', considered: 0 },
  };
}

/**
 * A directly addressed agent (target_agent_id, or the subscriber of a fan-out copy): it must be
 * registered, not OFFLINE, hold a valid lease and be reachable. COOLDOWN does not stop it: the
 * sender chose this agent (replies and receipts go this way), so there is no balancing to do.
 */
function routeToAgent(envelope: Envelope, agentId: string, strategy: Strategy, deps: RouteDeps, now: number, parentMessageId?: string): RouteDecision {
  const agent = deps.index.agent(agentId);
  const noRoute = (why: string, rejected?: Rejection, backBy?: number): RouteDecision => ({
    kind: 'no_route',
    why,
    candidates: 0,
    trace: { strategy, address: agentId, considered: agent ? 1 : 0, ...(rejected ? { rejected: { [rejected]: 1 } } : {}) },
    ...(backBy !== undefined ? { reconnectingUntil: backBy } : {}),
  });
  if (!agent) return noRoute(`agent ${agentId} is not registered`);
  if (agent.status === 'OFFLINE') return noRoute(`agent ${agentId} is OFFLINE`, 'status');
  if (agent.lease_expires_at <= now) return noRoute(`agent ${agentId} has an expired lease`, 'lease');
  const presence = deps.index.presenceOf(agentId);
  if (!isReachable(agent, presence)) {
    const backBy = reconnectingUntil(presence, deps.config.reconnectGraceMs ?? 0, now);
    if (backBy !== null) return noRoute(`agent ${agentId} is reconnecting`, 'reconnecting', backBy);
    return noRoute(`agent ${agentId} is neither connected nor has an HTTP endpoint`, 'unreachable');
  }
  if (deps.hooks?.circuitOpen?.(agentId)) return noRoute(`agent ${agentId} has an open circuit`, 'circuit');
  if (deps.hooks?.domainAllowed && !deps.hooks.domainAllowed(envelope, agent)) {
    return noRoute(`agent ${agentId} is in domain ${agent.metadata.domain ?? 'default'} and no grant lets the producer reach it`, 'domain');
  }
  const scored = scoreCandidates([agent], deps.config, deps.rng);
  return {
    kind: 'routed',
    agentId,
    candidates: 1,
    trace: { strategy, candidates: traceCandidates(scored, undefined), candidates_total: 1, chosen: agentId },
    ...(parentMessageId !== undefined ? { parentMessageId } : {}),
  };
}

/** Every candidate gets a tracked copy: a topic's subscribers (R-B8), or a capability's handlers under a broadcast rule. */
function fanOut(envelope: Envelope, address: Address, mode: CapabilityMode, hints: RouteHints, deps: RouteDeps, now: number): RouteDecision {
  const what = mode === 'subscribe' ? `subscriber of topic ${address.name}` : `agent offering capability ${envelope.capability ?? address.name}`;
  const f = filterCandidates(deps.index, {
    address,
    mode,
    requiredTags: hints.capabilityTags,
    // A fan-out is not a failover: a retried copy carries its own agent (FANOUT_AGENT).
    exclude: [],
    envelope,
    now,
    reconnectGraceMs: deps.config.reconnectGraceMs ?? 0,
    ...(deps.hooks ? { hooks: deps.hooks } : {}),
  });
  if (f.candidates.length === 0) {
    return {
      kind: 'no_route',
      why: `no live ${what}`,
      candidates: 0,
      trace: {
        strategy: 'broadcast',
        address: envelope.topic ?? envelope.capability ?? address.name,
        considered: f.considered,
        ...(Object.keys(f.rejected).length ? { rejected: f.rejected } : {}),
      },
      ...(f.reconnectingUntil !== null ? { reconnectingUntil: f.reconnectingUntil } : {}),
    };
  }
  const scored = scoreCandidates(f.candidates, deps.config, deps.rng);
  const agentIds = f.candidates.map((a) => a.agent_id).sort();
  return {
    kind: 'fanout',
    agentIds,
    candidates: agentIds.length,
    trace: { strategy: 'broadcast', candidates: traceCandidates(scored, undefined), candidates_total: agentIds.length, chosen: null },
  };
}

/** The sticky_by field in the trace, when it is not the session. */
function by(policy: RoutePolicy): { sticky_by?: string } {
  return policy.stickyBy !== null && policy.stickyBy !== 'session_id' ? { sticky_by: policy.stickyBy } : {};
}

/** Best available candidate: the top score, or a random one of the best `topK` when there are many (R-B4). */
/**
 * The candidates whose lane backlog is within one round of the shortest, where a round is the
 * agent's max_concurrency: deliveries waiting / max_concurrency is how many times its slots
 * must turn over before a new delivery is sent. With no backlog anywhere, every candidate;
 * with one agent queued 30 rounds deep and another 0.2, only the second.
 */
export function leastQueued(pool: readonly ScoredCandidate[], backlog: ((agentId: string) => number) | undefined): readonly ScoredCandidate[] {
  if (!backlog) return pool;
  const rounds = pool.map((c) => backlog(c.agent.agent_id) / Math.max(1, c.agent.metadata.max_concurrency));
  const least = Math.min(...rounds);
  return pool.filter((_, i) => rounds[i]! < least + 1);
}

function best(pool: readonly ScoredCandidate[], cfg: RoutingConfig, rng: () => number): { agent: AgentRecord; strategy: Strategy } {
  const sorted = [...pool].sort(byScore);
  if (sorted.length > cfg.hotspotCandidates) {
    const k = Math.min(cfg.topK, sorted.length);
    const i = Math.min(k - 1, Math.floor(rng() * k));
    return { agent: sorted[i]!.agent, strategy: 'top_k_random' };
  }
  return { agent: sorted[0]!.agent, strategy: 'weighted' };
}

async function routeToCapability(
  envelope: Envelope,
  capability: string,
  hints: RouteHints,
  deps: RouteDeps,
  now: number,
  policy: RoutePolicy,
): Promise<RouteDecision> {
  const cfg = deps.config;
  // The same (message, attempt) already went to this agent (its record consumed again): it goes
  // there again unless the agent went OFFLINE, whatever its load, circuit or lease in this view
  // now (after a broker outage leases look expired until the registry's records catch up) —
  // its dispatcher recognises the delivery and keeps one copy, where another agent would run
  // the task twice. Should the agent be gone, the delivery's ack deadline retries it elsewhere.
  const decided = hints.decidedAgent !== undefined ? deps.index.agent(hints.decidedAgent) : undefined;
  if (decided && decided.status !== 'OFFLINE') {
    return {
      kind: 'routed',
      agentId: decided.agent_id,
      candidates: 1,
      trace: { strategy: 'repeat', candidates: [], candidates_total: 1, chosen: decided.agent_id },
    };
  }
  const f = filterCandidates(deps.index, {
    address: parseAddress(capability),
    mode: 'handle',
    requiredTags: hints.capabilityTags,
    exclude: hints.excludeAgents,
    envelope,
    now,
    reconnectGraceMs: deps.config.reconnectGraceMs ?? 0,
    ...(deps.hooks ? { hooks: deps.hooks } : {}),
  });
  const rejected = Object.keys(f.rejected).length ? { rejected: f.rejected } : {};
  if (f.candidates.length === 0) {
    return {
      kind: 'no_route',
      why: `no live agent offers capability ${capability}`,
      candidates: 0,
      trace: { strategy: 'weighted', address: capability, considered: f.considered, ...rejected },
      ...(f.reconnectingUntil !== null ? { reconnectingUntil: f.reconnectingUntil } : {}),
    };
  }
  const relaxed = f.exclusionRelaxed ? { exclusion_relaxed: true as const } : {};
  const scored = scoreCandidates(f.candidates, cfg, deps.rng);
  // Saturated agents take no new work while any other candidate has room (R-B7).
  const unsaturated = scored.filter((c) => c.loadRate <= cfg.saturation);
  // When every candidate is saturated, a HIGH message is not held here with the rest: it goes to
  // an agent now and waits in that agent's HIGH lane in the dispatcher, which serves it ahead of
  // the NORMAL/LOW backlog (R-D9). Held on reach.retry.v1 it would queue behind the flood.
  const highThrough = unsaturated.length === 0 && envelope.priority === 'HIGH' && !hints.rejectOnSaturation;
  const pool = highThrough ? scored : unsaturated;
  if (pool.length === 0) {
    return {
      kind: 'saturated',
      candidates: scored.length,
      trace: {
        strategy: 'weighted',
        candidates: traceCandidates(scored, cfg.saturation),
        candidates_total: scored.length,
        chosen: null,
        saturation: cfg.saturation,
        ...rejected,
        ...relaxed,
      },
    };
  }
  const inPool = (id: string | null | undefined): ScoredCandidate | undefined => (id ? pool.find((c) => c.agent.agent_id === id) : undefined);
  // The free choice (weighted or random) is among the least queued candidates: their load rate
  // comes with heartbeats, seconds late, and a burst spread evenly queued behind the slower
  // agents (lane-backlog.ts). A sender's preference, a session and a circuit probe still pick
  // from the whole pool.
  const free = leastQueued(pool, deps.backlog);

  let chosen: AgentRecord | undefined;
  let strategy: Strategy = 'weighted';
  let preferred: RouteTrace['preferred'];
  let sticky: RouteTrace['sticky'];

  if (hints.preferredAgent !== undefined) {
    const p = inPool(hints.preferredAgent);
    preferred = { agent_id: hints.preferredAgent, honoured: p !== undefined };
    if (p) [chosen, strategy] = [p.agent, 'preferred'];
  }

  const session = policy.dispatch === 'sticky' || policy.rule === null ? stickyValue(envelope, policy.stickyBy) : null;
  let storeUsable = false;
  // Bindings by session keep their historical key; other sticky_by fields are namespaced.
  const key = session ? stickyKey(capability, policy.stickyBy === 'session_id' ? session : `${policy.stickyBy}=${session}`) : '';
  if (session) {
    let bound: string | null = null;
    try {
      bound = await deps.sticky.get(key);
      storeUsable = true;
    } catch {
      storeUsable = false;
    }
    if (storeUsable) {
      const b = inPool(bound);
      if (!chosen && b) [chosen, strategy] = [b.agent, 'sticky'];
      sticky = { session_id: session, ...by(policy), source: 'store', bound, kept: b !== undefined && chosen === b.agent };
    } else {
      const hashed = inPool(
        rendezvousPick(
          session,
          pool.map((c) => c.agent.agent_id),
        ),
      );
      if (!chosen && hashed) [chosen, strategy] = [hashed.agent, 'sticky_hash'];
      sticky = { session_id: session, ...by(policy), source: 'hash', bound: null, kept: false };
    }
  }

  // A claimed half-open probe (R-D8) must reach its agent, or the circuit never closes.
  const probe = deps.hooks?.circuitProbe;
  if (!chosen && probe !== undefined) {
    const p = inPool(probe);
    if (p) [chosen, strategy] = [p.agent, 'circuit_probe'];
  }

  if (!chosen && policy.dispatch === 'random') [chosen, strategy] = [free[Math.min(free.length - 1, Math.floor(deps.rng() * free.length))]!.agent, 'random'];
  if (!chosen) ({ agent: chosen, strategy } = best(free, cfg, deps.rng));

  // Bind (or refresh) the session to the agent that got it; a failure only costs stickiness.
  if (session && storeUsable && deps.bindSticky !== false) {
    try {
      await deps.sticky.set(key, chosen.agent_id, cfg.stickyTtlS);
    } catch {
      // The next message of the session re-binds, or falls back to the hash.
    }
  }

  return {
    kind: 'routed',
    agentId: chosen.agent_id,
    candidates: scored.length,
    trace: {
      strategy,
      candidates: traceCandidates(scored, cfg.saturation, deps.backlog),
      candidates_total: scored.length,
      chosen: chosen.agent_id,
      ...(highThrough ? { saturation: cfg.saturation } : {}),
      ...(sticky ? { sticky } : {}),
      ...(preferred ? { preferred } : {}),
      ...rejected,
      ...relaxed,
    },
  };
}
