import type { AgentRecord } from '@reach/envelope';
import { loadRate } from './agent-record.js';

/** Capabilities beyond the busiest N are folded into this one row, so metric labels stay bounded. */
export const OTHER_CAPABILITIES = '_other';

export interface CapabilityStats {
  capability: string;
  /** Agents offering it, by status. */
  agents: Record<string, number>;
  /** Mean load rate (current_load / max_concurrency) of its ONLINE agents; 0 when none. */
  meanLoadRate: number;
  /** Lowest and mean QoS of its ONLINE agents; 1 when none. */
  minQos: number;
  meanQos: number;
}

interface Acc {
  agents: Record<string, number>;
  online: number;
  load: number;
  qosSum: number;
  qosMin: number;
}

const empty = (): Acc => ({ agents: {}, online: 0, load: 0, qosSum: 0, qosMin: 1 });

function add(acc: Acc, r: AgentRecord): void {
  acc.agents[r.status] = (acc.agents[r.status] ?? 0) + 1;
  if (r.status !== 'ONLINE') return;
  acc.online++;
  acc.load += loadRate(r);
  acc.qosSum += r.qos;
  acc.qosMin = Math.min(acc.qosMin, r.qos);
}

/**
 * Per-capability health of the fleet for the registry's metrics (R-F2: per-agent load and
 * QoS, with bounded labels): the `topN` capabilities with the most live (ONLINE or COOLDOWN) agents
 * (then the most agents) get a row each, the rest share OTHER_CAPABILITIES. An agent counts once per distinct capability name it offers.
 */
export function capabilityStats(records: Iterable<AgentRecord>, topN: number): CapabilityStats[] {
  const byName = new Map<string, AgentRecord[]>();
  for (const r of records) {
    for (const name of new Set(r.capabilities.map((c) => c.name))) {
      const list = byName.get(name);
      if (list) list.push(r);
      else byName.set(name, [r]);
    }
  }
  // Live capabilities first (what operators watch), then by fleet size; the name breaks ties.
  const live = (agents: readonly AgentRecord[]) => agents.filter((r) => r.status !== 'OFFLINE').length;
  const ranked = [...byName.entries()]
    .map(([name, agents]) => ({ name, agents, live: live(agents) }))
    .sort((a, b) => b.live - a.live || b.agents.length - a.agents.length || (a.name < b.name ? -1 : 1));
  const rows = new Map<string, Acc>();
  ranked.forEach(({ name, agents }, i) => {
    const key = i < topN ? name : OTHER_CAPABILITIES;
    const acc = rows.get(key) ?? empty();
    for (const r of agents) add(acc, r);
    rows.set(key, acc);
  });
  return [...rows.entries()].map(([capability, a]) => ({
    capability,
    agents: a.agents,
    meanLoadRate: a.online ? a.load / a.online : 0,
    minQos: a.online ? a.qosMin : 1,
    meanQos: a.online ? a.qosSum / a.online : 1,
  }));
}
