/**
 * Lane backlog: how many deliveries wait in the dispatcher's lanes for a free slot of an agent
 * (its `max_concurrency` deliveries are in flight and more came). Dispatchers write it to one
 * Redis hash (field = agent id, value = `<waiting>:<epoch ms>`); routers read the whole hash a
 * few times a second and give new work to a candidate with nothing waiting while there is one.
 *
 * Why: the load in an AgentRecord comes with the agent's heartbeat, seconds old. After a broker
 * restart at 500 msg/s the outage's backlog reached the router in one burst and went evenly to
 * every agent: the capped, slower agents' lanes filled with 20 s of work while uncapped agents
 * that acked at once sat idle, and ~17 % of the messages ended DEAD 3005 in those lanes.
 */
export const LANE_BACKLOG_KEY = 'reach:lane-backlog';
/**
 * A report older than this is ignored: its dispatcher stopped reporting (died). Generous, as a
 * saturated dispatcher's timer runs late, and a drained agent's field is deleted anyway.
 */
export const LANE_BACKLOG_MAX_AGE_MS = 5_000;
/** How often a dispatcher reports and a router reads. */
export const LANE_BACKLOG_EVERY_MS = 250;

export function encodeLaneBacklog(waiting: number, at: number): string {
  return `${waiting}:${at}`;
}

/** The fresh reports of a read hash: agent id → deliveries waiting (> 0). */
export function decodeLaneBacklog(fields: Record<string, string>, now: number, maxAgeMs = LANE_BACKLOG_MAX_AGE_MS): Map<string, number> {
  const out = new Map<string, number>();
  for (const [agent, value] of Object.entries(fields)) {
    const [waiting, at] = value.split(':').map(Number);
    if (waiting === undefined || at === undefined || !Number.isFinite(waiting) || !Number.isFinite(at)) continue;
    if (waiting > 0 && now - at <= maxAgeMs) out.set(agent, waiting);
  }
  return out;
}

/** Fields of the hash no dispatcher has refreshed for `staleAfterMs` (to delete). */
export function staleLaneBacklog(fields: Record<string, string>, now: number, staleAfterMs: number): string[] {
  return Object.entries(fields)
    .filter(([, value]) => {
      const at = Number(value.split(':')[1]);
      return !Number.isFinite(at) || now - at > staleAfterMs;
    })
    .map(([agent]) => agent);
}
