import { acceptsNewWork, capabilityMatches, parseCapabilityName } from '@reach/agents';
import type { AgentRecord } from '@reach/envelope';
import { expireAtOf, type EntryRow } from './entry.js';

/** What a parked NO_ROUTE entry addresses (from its stored envelope). */
export interface ParkedAddress {
  capability: string | null;
  topic: string | null;
  targetAgentId: string | null;
}

export function addressOf(row: Pick<EntryRow, 'capability' | 'envelope_json'>): ParkedAddress {
  const env = row.envelope_json ?? {};
  return {
    capability: row.capability ?? (typeof env.capability === 'string' ? env.capability : null),
    topic: typeof env.topic === 'string' ? env.topic : null,
    targetAgentId: typeof env.target_agent_id === 'string' ? env.target_agent_id : null,
  };
}

/**
 * Can this agent take a message with this address now? It must accept new work (ONLINE, lease
 * valid), and offer the capability in `handle` mode (exact name, a pinned `@major` must match),
 * subscribe to the topic, or be the target agent.
 */
export function agentServes(agent: AgentRecord, address: ParkedAddress, now: number): boolean {
  if (!acceptsNewWork(agent, now)) return false;
  if (address.capability !== null) return agent.capabilities.some((c) => c.mode === 'handle' && capabilityMatches(address.capability!, c));
  if (address.topic !== null) return agent.capabilities.some((c) => c.mode === 'subscribe' && capabilityMatches(address.topic!, c));
  if (address.targetAgentId !== null) return agent.agent_id === address.targetAgentId;
  return false;
}

/** The names to look parked entries up by for these agents: capability bases, topics, agent ids. */
export function lookupKeys(agents: readonly AgentRecord[]): { capabilityBases: string[]; topics: string[]; agentIds: string[] } {
  const bases = new Set<string>();
  const topics = new Set<string>();
  for (const a of agents) {
    for (const c of a.capabilities) {
      const base = parseCapabilityName(c.name)?.base ?? c.name.split('@')[0]!;
      if (c.mode === 'handle') bases.add(base);
      else topics.add(c.name);
    }
  }
  return { capabilityBases: [...bases], topics: [...topics], agentIds: agents.map((a) => a.agent_id) };
}

/** For one parked entry: replay it (an agent serves it), let it expire, or keep waiting. */
export function redriveDecision(
  row: Pick<EntryRow, 'capability' | 'envelope_json'>,
  agents: Iterable<AgentRecord>,
  now: number,
): 'replay' | 'expired' | 'wait' {
  const expireAt = expireAtOf(row);
  if (expireAt !== undefined && expireAt <= now) return 'expired';
  const address = addressOf(row);
  for (const a of agents) if (agentServes(a, address, now)) return 'replay';
  return 'wait';
}
