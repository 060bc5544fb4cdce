import type { Logger } from '@reach/core';
import { encodeLaneBacklog, LANE_BACKLOG_EVERY_MS, LANE_BACKLOG_KEY, LANE_BACKLOG_MAX_AGE_MS, staleLaneBacklog } from '@reach/routing';
import { PeriodicJob } from '@reach/service-kit';
import type { Redis } from '@reach/store';
import type { ReplayBuffer } from './replay-buffer.js';

/** Every this many reports, fields no dispatcher refreshed (an instance killed mid-report) go. */
const PRUNE_EVERY = 40;

/**
 * Tells the routers which agents have deliveries waiting for a free slot (`reach:lane-backlog`,
 * see @reach/routing lane-backlog.ts): every LANE_BACKLOG_EVERY_MS it counts the lanes of the
 * agents a delivery was queued for and writes the non-empty ones; an agent whose lanes ran
 * empty is deleted and no longer counted. Only agents that queued are watched, so an idle stack
 * or one whose agents keep up costs one HGETALL every 10 s here (the prune), nothing more.
 */
export class LaneBacklogReporter {
  private readonly watched = new Set<string>();
  /** Queued since the current report began: kept watched even if that report saw them drained. */
  private readonly fresh = new Set<string>();
  private readonly job: PeriodicJob;
  private reports = 0;

  constructor(
    private readonly buffer: Pick<ReplayBuffer, 'flowState'>,
    private readonly redis: Redis,
    log: Logger,
  ) {
    // Redis away: the routers read nothing either; its outage is logged by the clients.
    const report = () => this.report().catch((err: unknown) => log.debug({ err }, 'lane backlog not reported'));
    this.job = new PeriodicJob('lane-backlog', LANE_BACKLOG_EVERY_MS, report, log);
  }

  start(): void {
    this.job.start();
  }

  stop(): Promise<void> {
    return this.job.stop();
  }

  /** A delivery for this agent went to a waiting lane. */
  queued(agent: string): void {
    this.watched.add(agent);
    this.fresh.add(agent);
  }

  /** One report (exported for tests; the job calls it). */
  async report(now = Date.now()): Promise<void> {
    if (++this.reports % PRUNE_EVERY === 0) await this.prune(now);
    if (this.watched.size === 0) return;
    this.fresh.clear();
    const agents = [...this.watched];
    const states = await Promise.all(agents.map((a) => this.buffer.flowState(a)));
    const fields: Record<string, string> = {};
    const drained: string[] = [];
    agents.forEach((agent, i) => {
      const waiting = states[i]!.waiting.reduce((a, b) => a + b, 0);
      if (waiting > 0) fields[agent] = encodeLaneBacklog(waiting, now);
      else drained.push(agent);
    });
    const tx = this.redis.multi();
    if (Object.keys(fields).length > 0) tx.hset(LANE_BACKLOG_KEY, fields);
    if (drained.length > 0) tx.hdel(LANE_BACKLOG_KEY, ...drained);
    await tx.exec();
    for (const agent of drained) if (!this.fresh.has(agent)) this.watched.delete(agent);
  }

  private async prune(now: number): Promise<void> {
    const stale = staleLaneBacklog(await this.redis.hgetall(LANE_BACKLOG_KEY), now, 2 * LANE_BACKLOG_MAX_AGE_MS);
    if (stale.length > 0) await this.redis.hdel(LANE_BACKLOG_KEY, ...stale);
  }
}
