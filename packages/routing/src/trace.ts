import type { Rejection } from './candidates.js';
import { byScore, type ScoredCandidate } from './score.js';

/**
 * The routing trace (R-B12): what the ROUTED status event's `detail` records — the
 * strategy, the candidates with the terms of their scores, and the choice. Bounded: at most
 * MAX_TRACE_CANDIDATES candidates are listed (the best ones), with the total alongside.
 * Three: the trace is stored with every routed message's timeline, and twenty made it ~1.5 KB
 * of jsonb per message, most of the read model's bytes. The runner-up and the one after say why
 * the choice won; `candidates_total` says how many there were.
 */
export const MAX_TRACE_CANDIDATES = 3;

export type Strategy =
  /** highest score */
  | 'weighted'
  /** anti-hotspot: random among the best few (R-B4) */
  | 'top_k_random'
  /** the sender's reach-preferred-agent (R-B5) */
  | 'preferred'
  /** the session's bound agent from the sticky store (R-B6) */
  | 'sticky'
  /** the sticky store could not answer: session hashed over the candidates */
  | 'sticky_hash'
  /** target_agent_id */
  | 'target'
  /** topic fan-out to every subscriber (R-B8) */
  | 'broadcast'
  /** uniform among the available candidates (a ReachRule's `dispatch: random`) */
  | 'random'
  /** a retried copy of a fan-out, back to its own subscriber */
  | 'fanout_copy'
  /** the one half-open probe of an agent's circuit breaker (R-D8) */
  | 'circuit_probe'
  /** a record consumed again: the agent this (message, attempt) was routed to before */
  | 'repeat';

export interface TraceCandidate {
  agent_id: string;
  score: number;
  load_rate: number;
  health: number;
  priority: number;
  locality: number;
  saturated?: true;
  /** Deliveries waiting in the dispatcher for a free slot of this agent (lane-backlog.ts). */
  waiting?: number;
}

export interface RouteTrace {
  strategy: Strategy;
  /** The ReachRule that decided how to dispatch, when one matched (R-B12). */
  rule?: string;
  candidates: TraceCandidate[];
  candidates_total: number;
  chosen: string | null;
  /** session_id holds the sticky value; sticky_by names its field when it is not the session. */
  sticky?: { session_id: string; sticky_by?: string; source: 'store' | 'hash'; bound: string | null; kept: boolean };
  preferred?: { agent_id: string; honoured: boolean };
  /** Agents that offer the name but are no candidate, by reason. */
  rejected?: Partial<Record<Rejection, number>>;
  /** The retry's exclusion list left no candidate and was dropped (R-B9). */
  exclusion_relaxed?: true;
  /** Set when every candidate was above this load rate (R-B7). */
  saturation?: number;
}

const round = (x: number): number => Math.round(x * 10_000) / 10_000;

export function traceCandidates(scored: readonly ScoredCandidate[], saturation: number | undefined, backlog?: (agentId: string) => number): TraceCandidate[] {
  return [...scored]
    .sort(byScore)
    .slice(0, MAX_TRACE_CANDIDATES)
    .map((c) => ({
      agent_id: c.agent.agent_id,
      score: round(c.score),
      load_rate: round(c.loadRate),
      health: round(c.health),
      priority: round(c.priority),
      locality: c.locality,
      ...(saturation !== undefined && c.loadRate > saturation ? { saturated: true as const } : {}),
      ...waitingField(backlog?.(c.agent.agent_id)),
    }));
}

function waitingField(waiting: number | undefined): { waiting?: number } {
  return waiting !== undefined && waiting > 0 ? { waiting } : {};
}
