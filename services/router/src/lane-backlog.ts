import type { Logger } from '@reach/core';
import { decodeLaneBacklog, LANE_BACKLOG_EVERY_MS, LANE_BACKLOG_KEY } from '@reach/routing';
import { PeriodicJob } from '@reach/service-kit';
import type { Redis } from '@reach/store';

/**
 * The routers' copy of `reach:lane-backlog` (@reach/routing lane-backlog.ts): which agents have
 * deliveries waiting in the dispatcher for a free slot, read whole every LANE_BACKLOG_EVERY_MS.
 * Routing reads the local copy and never waits for Redis; while Redis is away the copy is
 * empty, and routing falls back to the heartbeat's load alone.
 */
export class LaneBacklogView {
  private waiting = new Map<string, number>();
  /**
   * Deliveries this router sent each agent during the current and the previous read period:
   * not in any report yet (the dispatcher consumes and reports them later). Without them a
   * batch — the backlog of a broker restart comes as batches of hundreds — saw the same report
   * for every record and sent all of it to one agent (`pnpm chaos --rate 500`: 153 records of
   * one batch to one SDK agent, DEAD 3005 in its lane while the others were idle).
   */
  private routedNow = new Map<string, number>();
  private routedBefore = new Map<string, number>();
  private readonly job: PeriodicJob;

  constructor(
    private readonly redis: Redis,
    private readonly log: Logger,
  ) {
    this.job = new PeriodicJob('lane-backlog', LANE_BACKLOG_EVERY_MS, () => this.refresh(), log);
  }

  start(): void {
    this.job.start();
  }

  stop(): Promise<void> {
    return this.job.stop();
  }

  /** Deliveries waiting for a slot of this agent (0: none reported), plus those this router just sent it. */
  of(agentId: string): number {
    return (this.waiting.get(agentId) ?? 0) + (this.routedNow.get(agentId) ?? 0) + (this.routedBefore.get(agentId) ?? 0);
  }

  /** This router sent the agent a delivery. */
  routed(agentId: string): void {
    this.routedNow.set(agentId, (this.routedNow.get(agentId) ?? 0) + 1);
  }

  async refresh(now = Date.now()): Promise<void> {
    // A report read now covers what was consumed before it; what was routed just before may
    // not be in it yet, so it counts for one more period.
    this.routedBefore = this.routedNow;
    this.routedNow = new Map();
    try {
      this.waiting = decodeLaneBacklog(await this.redis.hgetall(LANE_BACKLOG_KEY), now);
    } catch (err) {
      // Redis away: no preference until it answers (its outage is logged by the clients).
      this.waiting = new Map();
      this.log.debug({ err }, 'lane backlog not read');
    }
  }
}
