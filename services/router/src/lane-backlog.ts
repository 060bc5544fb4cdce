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

  /** Deliveries waiting for a slot of this agent (0: none reported). */
  of(agentId: string): number {
    return this.waiting.get(agentId) ?? 0;
  }

  async refresh(now = Date.now()): Promise<void> {
    try {
      this.waiting = decodeLaneBacklog(await this.redis.hgetall(LANE_BACKLOG_KEY), now);
    } catch (err) {
      // Redis away: no preference until it answers (its outage is logged by the clients).
      this.waiting = new Map();
      this.log.debug({ err }, 'lane backlog not read');
    }
  }
}
