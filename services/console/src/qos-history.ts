/**
 * The QoS trend of each agent, from the registry's change feed (reach.agents.v1 carries a new
 * revision on every heartbeat): the last `perAgent` samples per agent, for the page's
 * sparklines. Bounded twice — samples per agent and agents — so a churn of short-lived agents
 * cannot grow it. Every sample gets a sequence number so a page asks only for what is new.
 */
export interface QosSample {
  seq: number;
  /** epoch ms of the record (its updated_at) */
  at: number;
  qos: number;
  load_rate: number;
}

/** [at, qos, load_rate]: the compact wire form. */
export type QosPoint = [number, number, number];

export interface QosDelta {
  /** The newest sequence number: pass it back as `since` to get only later samples. */
  seq: number;
  agents: Record<string, QosPoint[]>;
}

export class QosHistory {
  private readonly samples = new Map<string, QosSample[]>();
  private seq = 0;

  constructor(
    private readonly perAgent = 60,
    private readonly maxAgents = 5000,
  ) {}

  record(agentId: string, at: number, qos: number, loadRate: number): void {
    let list = this.samples.get(agentId);
    if (list) {
      const last = list[list.length - 1];
      // A record seen again (a replayed or re-read revision) is not a new point of the trend.
      if (last && at <= last.at) return;
      // Re-inserting keeps the map in least-recently-updated order for eviction.
      this.samples.delete(agentId);
    } else {
      list = [];
      if (this.samples.size >= this.maxAgents) {
        const oldest = this.samples.keys().next();
        if (!oldest.done) this.samples.delete(oldest.value);
      }
    }
    list.push({ seq: ++this.seq, at, qos, load_rate: loadRate });
    if (list.length > this.perAgent) list.splice(0, list.length - this.perAgent);
    this.samples.set(agentId, list);
  }

  forget(agentId: string): void {
    this.samples.delete(agentId);
  }

  /** Samples newer than `since` (0 = everything kept). */
  since(since = 0): QosDelta {
    const agents: Record<string, QosPoint[]> = {};
    for (const [id, list] of this.samples) {
      const fresh = list.filter((s) => s.seq > since);
      if (fresh.length > 0) agents[id] = fresh.map((s) => [s.at, s.qos, s.load_rate]);
    }
    return { seq: this.seq, agents };
  }
}
