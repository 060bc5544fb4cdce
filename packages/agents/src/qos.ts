import type { AgentStatus } from '@reach/envelope';

/**
 * The QoS score of an agent (R-A5), computed by the registry from each heartbeat and
 * published on reach.agents.v1, so every router sees the same value.
 *
 *   load_rate     ρ = current_load / max_concurrency          (a rate, never a count: R-B3)
 *   load_score      = 1 − min(ρ, 1)                            1 idle … 0 at or over capacity
 *   latency_score   = L₀ / (L₀ + avg_latency_ms), L₀ = 5000 ms   1 instant, ½ at 5 s, ⅓ at 10 s
 *   health          = the agent's own health in [0, 1]
 *
 *   qos = health × (0.7 · load_score + 0.3 · latency_score)    in [0, 1]
 *
 * Why this shape: health multiplies, so an agent that reports itself unhealthy scores near 0
 * whatever its load. Load dominates the rest because it is what a new message competes for.
 * Latency uses a soft reference of seconds, not milliseconds: LLM-backed agents routinely take
 * seconds, and a slow-but-idle agent should still take work (idle at 10 s latency → 0.80),
 * while a full and slow one should not (full at 10 s → 0.10, COOLDOWN at the default 0.3).
 * Queue length is not in the score: it is already pressure the router's saturation rule sees.
 */
export const QOS_LOAD_WEIGHT = 0.7;
export const QOS_LATENCY_WEIGHT = 0.3;
export const QOS_LATENCY_REFERENCE_MS = 5000;

export interface LoadReport {
  current_load: number;
  queue_length: number;
  avg_latency_ms: number;
  health: number;
}

function clamp01(x: number): number {
  if (!Number.isFinite(x)) return 0;
  return Math.min(1, Math.max(0, x));
}

/** current_load / max_concurrency; 0 for a nonsensical capacity rather than Infinity. */
export function loadRateOf(currentLoad: number, maxConcurrency: number): number {
  if (!(maxConcurrency > 0) || !(currentLoad > 0)) return 0;
  return currentLoad / maxConcurrency;
}

export function qosScore(load: LoadReport, maxConcurrency: number): number {
  const loadScore = 1 - Math.min(loadRateOf(load.current_load, maxConcurrency), 1);
  const latency = Math.max(0, Number.isFinite(load.avg_latency_ms) ? load.avg_latency_ms : 0);
  const latencyScore = QOS_LATENCY_REFERENCE_MS / (QOS_LATENCY_REFERENCE_MS + latency);
  const score = clamp01(load.health) * (QOS_LOAD_WEIGHT * loadScore + QOS_LATENCY_WEIGHT * latencyScore);
  // Rounded so the published value is stable across platforms and readable in logs.
  return Math.round(clamp01(score) * 1e6) / 1e6;
}

/** Below the threshold (REACH_COOLDOWN_QOS) an agent takes no new work; back at or above it, it does. */
export function statusForQos(qos: number, cooldownBelow: number): Exclude<AgentStatus, 'OFFLINE'> {
  return qos < cooldownBelow ? 'COOLDOWN' : 'ONLINE';
}

/**
 * The status a load report gives: COOLDOWN when the QoS the agent would have with its slots
 * free is below the threshold. Being busy is not being unhealthy: routers hold the work of a
 * full agent until a slot frees (saturation, PENDING 2002), while COOLDOWN refuses its senders
 * (2001). Judged on the QoS with its load, every agent reported full scored at most
 * 0.3 × latency_score × health, under the default 0.3 as soon as it had answered anything, and
 * its messages were REJECTED 2001 until its next heartbeat (seen once the SDKs' early
 * heartbeats reported full agents at once). The published QoS keeps the load: it ranks agents.
 */
export function statusForLoad(load: LoadReport, maxConcurrency: number, cooldownBelow: number): Exclude<AgentStatus, 'OFFLINE'> {
  return statusForQos(qosScore({ ...load, current_load: 0 }, maxConcurrency), cooldownBelow);
}

/**
 * A heartbeat's `health`: a number in [0, 1], or a word agents commonly send
 * (`ok`/`healthy` = 1, `degraded` = 0.5, `unhealthy`/`down` = 0). Undefined when unreadable.
 */
export function healthValue(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) && v >= 0 && v <= 1 ? v : undefined;
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v !== 'string') return undefined;
  switch (v.trim().toLowerCase()) {
    case 'ok':
    case 'healthy':
    case 'up':
    case 'green':
      return 1;
    case 'degraded':
    case 'yellow':
      return 0.5;
    case 'unhealthy':
    case 'down':
    case 'red':
    case 'failing':
      return 0;
    default:
      return undefined;
  }
}
