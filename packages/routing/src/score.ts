import type { AgentRecord } from '@reach/envelope';

/** Scoring weights and jitter (R-B3; REACH_ROUTE_WEIGHT_*, REACH_ROUTE_JITTER). */
export interface ScoringConfig {
  readonly weightPriority: number;
  readonly weightHealth: number;
  readonly weightLoad: number;
  readonly weightLocality: number;
  readonly jitter: number;
  /** This router's region (REACH_REGION); empty = no locality preference. */
  readonly region: string;
}

/** One candidate with the terms of its score, as the routing trace shows them (R-B12). */
export interface ScoredCandidate {
  readonly agent: AgentRecord;
  readonly score: number;
  readonly loadRate: number;
  readonly health: number;
  readonly priority: number;
  readonly locality: number;
}

const clamp01 = (x: number): number => (Number.isFinite(x) ? Math.min(1, Math.max(0, x)) : 0);

/**
 * Load as a RATE (R-B3): current_load / max_concurrency. Never an absolute count: an agent
 * running 8 of 100 slots is less loaded than one running 3 of 4. Not capped at 1, so an agent
 * over its limit reads as over 100 %.
 */
export function loadRate(agent: AgentRecord): number {
  const max = agent.metadata.max_concurrency > 0 ? agent.metadata.max_concurrency : 1;
  const rate = agent.load.current_load / max;
  return Number.isFinite(rate) && rate > 0 ? rate : 0;
}

/**
 * Scores candidates: weighted priority (metadata.weight normalised to the best weight among the
 * candidates), health (the heartbeat's recent success rate), free capacity (1 − load rate) and
 * locality (same region), plus a random jitter so equal agents share the work.
 */
export function scoreCandidates(agents: readonly AgentRecord[], cfg: ScoringConfig, rng: () => number): ScoredCandidate[] {
  const maxWeight = agents.reduce((m, a) => Math.max(m, Number.isFinite(a.metadata.weight) ? a.metadata.weight : 0), 0);
  return agents.map((agent) => {
    const rate = loadRate(agent);
    const priority = maxWeight > 0 ? clamp01(agent.metadata.weight / maxWeight) : 0;
    const health = clamp01(agent.load.health);
    const locality = cfg.region !== '' && agent.metadata.region === cfg.region ? 1 : 0;
    const score =
      cfg.weightPriority * priority + cfg.weightHealth * health + cfg.weightLoad * (1 - Math.min(1, rate)) + cfg.weightLocality * locality + cfg.jitter * rng();
    return { agent, score, loadRate: rate, health, priority, locality };
  });
}

/** Best first; ties broken by agent id so the order is deterministic. */
export function byScore(a: ScoredCandidate, b: ScoredCandidate): number {
  return b.score - a.score || (a.agent.agent_id < b.agent.agent_id ? -1 : a.agent.agent_id > b.agent.agent_id ? 1 : 0);
}
