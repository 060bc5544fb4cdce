/**
 * R-G5: `AGENT_REACH_MODE=direct|queued`. `queued` (the default) is the real thing: every
 * message goes through Agent-Reach's services. `direct` runs the same agent code with no
 * infrastructure: nodes of one process deliver to each other through an in-process LocalReach
 * that routes with the routing, agents and rules packages and keeps the asynchronous delivery
 * semantics (acks, rejects, retries with backoff, ack deadlines, redeliveries, a timeline).
 */
export type ReachMode = 'direct' | 'queued';

export const REACH_MODES: readonly ReachMode[] = ['direct', 'queued'];

/** The mode to run in: the option when given, else AGENT_REACH_MODE, else `queued`. */
export function modeOf(option?: ReachMode, env: Readonly<Record<string, string | undefined>> = process.env): ReachMode {
  const raw = option ?? (env.AGENT_REACH_MODE?.trim().toLowerCase() || 'queued');
  if (!(REACH_MODES as readonly string[]).includes(raw)) throw new Error(`AGENT_REACH_MODE must be direct or queued (got ${JSON.stringify(raw)})`);
  return raw as ReachMode;
}
