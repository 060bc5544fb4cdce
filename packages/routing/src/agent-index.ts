import type { AgentRecord, Presence } from '@reach/envelope';

/**
 * The router's local view of the registry (R-A6): the latest AgentRecord and Presence of
 * every agent, folded from the compacted reach.agents.v1 / reach.presence.v1 feeds, and an
 * index capability name → agents so a message finds its candidates without scanning every
 * agent or calling anything remote. Pure data structure: the service feeds it from the table
 * views' change callbacks.
 */
export class AgentIndex {
  private readonly agents = new Map<string, AgentRecord>();
  private readonly presence = new Map<string, Presence>();
  private readonly byName = new Map<string, Set<string>>();

  get size(): number {
    return this.agents.size;
  }

  agent(agentId: string): AgentRecord | undefined {
    return this.agents.get(agentId);
  }

  presenceOf(agentId: string): Presence | undefined {
    return this.presence.get(agentId);
  }

  /** Every capability or topic name some agent declares. */
  names(): string[] {
    return [...this.byName.keys()];
  }

  /** Agents declaring a capability with exactly this name (any mode or version). */
  withCapability(name: string): AgentRecord[] {
    const ids = this.byName.get(name);
    if (!ids) return [];
    const out: AgentRecord[] = [];
    for (const id of ids) {
      const rec = this.agents.get(id);
      if (rec) out.push(rec);
    }
    return out;
  }

  /**
   * Applies a record unless it is older than the one held: the feed is at-least-once and two
   * registry instances may publish out of order, so `revision` decides (equal = a re-publish).
   * Returns whether it was applied.
   */
  upsertAgent(rec: AgentRecord): boolean {
    const current = this.agents.get(rec.agent_id);
    if (current && rec.revision < current.revision) return false;
    if (current) this.unindex(current);
    this.agents.set(rec.agent_id, rec);
    for (const name of new Set(rec.capabilities.map((c) => c.name))) {
      let ids = this.byName.get(name);
      if (!ids) this.byName.set(name, (ids = new Set()));
      ids.add(rec.agent_id);
    }
    return true;
  }

  /** A tombstone: the agent deregistered. */
  removeAgent(agentId: string): void {
    const current = this.agents.get(agentId);
    if (!current) return;
    this.unindex(current);
    this.agents.delete(agentId);
  }

  /** Applies a presence change unless it is superseded (see `newerPresence`). */
  setPresence(p: Presence): boolean {
    if (!newerPresence(p, this.presence.get(p.agent_id))) return false;
    this.presence.set(p.agent_id, p);
    return true;
  }

  removePresence(agentId: string): void {
    this.presence.delete(agentId);
  }

  private unindex(rec: AgentRecord): void {
    for (const c of rec.capabilities) {
      const ids = this.byName.get(c.name);
      if (!ids) continue;
      ids.delete(rec.agent_id);
      if (ids.size === 0) this.byName.delete(c.name);
    }
  }
}

/** Newer-or-equal revision wins; for the table view's `accept` hook. */
export function newerAgentRecord(incoming: AgentRecord, current: AgentRecord | undefined): boolean {
  return current === undefined || incoming.revision >= current.revision;
}

/**
 * Whether a presence record replaces the one held (also the table view's `accept` hook): the
 * newer one by `at` wins, except the "disconnected" of a connection that was already replaced.
 * An agent that reconnects to dispatcher B while A is still noticing the old socket close gets
 * A's late disconnect after B's connect; that must not make it unreachable.
 */
export function newerPresence(incoming: Presence, current: Presence | undefined): boolean {
  if (current === undefined) return true;
  if (incoming.at < current.at) return false;
  const staleDisconnect =
    !incoming.connected &&
    current.connected &&
    incoming.connection_id !== null &&
    current.connection_id !== null &&
    incoming.connection_id !== current.connection_id;
  return !staleDisconnect;
}
