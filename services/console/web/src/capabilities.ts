/** The capability → agents index the page shows, from GET /v1/agents (pure: unit-tested). */
export interface CapabilityAgent {
  agent_id: string;
  status: string;
  load_rate: number;
  qos: number;
}

export interface CapabilityEntry {
  capability: string;
  agents: CapabilityAgent[];
  /** Agents that can take new work now (ONLINE). */
  available: number;
}

interface AgentLike {
  agent_id: string;
  status: string;
  qos: number;
  load: { load_rate: number };
  capabilities: ReadonlyArray<{ name: string }>;
}

/** Capabilities by name, each with its agents best-first (ONLINE, then QoS). */
export function capabilityIndex(agents: readonly AgentLike[]): CapabilityEntry[] {
  const byName = new Map<string, CapabilityAgent[]>();
  for (const a of agents) {
    for (const name of new Set(a.capabilities.map((c) => c.name))) {
      let list = byName.get(name);
      if (!list) byName.set(name, (list = []));
      list.push({ agent_id: a.agent_id, status: a.status, load_rate: a.load.load_rate, qos: a.qos });
    }
  }
  const rank = (s: string) => (s === 'ONLINE' ? 0 : s === 'COOLDOWN' ? 1 : 2);
  return [...byName]
    .map(([capability, list]) => ({
      capability,
      agents: list.sort((x, y) => rank(x.status) - rank(y.status) || y.qos - x.qos || x.agent_id.localeCompare(y.agent_id)),
      available: list.filter((x) => x.status === 'ONLINE').length,
    }))
    .sort((x, y) => x.capability.localeCompare(y.capability));
}
