import { AGENT_RECONNECT_BACKOFF, type Logger } from '@reach/core';
import type { Redis } from '@reach/store';

/**
 * Which dispatcher instances are alive, and how long the agents of one that died have had no
 * socket.
 *
 * A dispatcher killed with un-acked deliveries takes its agents' sockets with it, and with one
 * instance nobody sweeps its deadlines until it is back. Its agents reconnect with the
 * protocol's backoff (1 s doubling to 32 s, plus up to 20 % jitter), so an agent whose
 * dispatcher was away for D seconds has backed off to a delay close to D and may come back
 * only that long after the dispatcher listens again. It then sends again the acks its dead
 * socket swallowed. Sweeping those deliveries before it is back retries them on another agent
 * while the first one did the work: the task runs twice (`pnpm chaos` in CI: a dispatcher that
 * took 10 s to restart, its agent back 5–8 s after that, one key run on two agents).
 *
 * So every instance stamps itself alive every LIVENESS_EVERY_MS in one hash, and a starting
 * instance reads how long ago the others last did (`sinceLastAlive`): its start-up deferral of
 * the ack deadlines (dispatcher.ts) then covers the reconnect backoff that downtime implies
 * (`rejoinWindowMs`), not just one ack window.
 */
export const LIVENESS_KEY = 'reach:dispatchers';
export const LIVENESS_EVERY_MS = 1_000;
/**
 * A live instance forgets one that has not stamped itself for this long. Its agents came back
 * to a live instance long ago; an entry no live instance outlived stays (a start days after
 * the last instance was killed waits the longest backoff step, as its agents may).
 */
export const FORGET_AFTER_MS = 60_000;

/** Time for a reconnecting agent's hello, welcome and resent answers. */
const REJOIN_MARGIN_MS = 2_000;

/**
 * How long after a dispatcher listens again its agents may take to be back, when they lost it
 * `downMs` ago (undefined: no instance died; one ack window, as always).
 *
 * The agent's attempts came at cumulative delays base·(2^k − 1) (at least, without jitter), so
 * the last one before the dispatcher was back had a next delay base·2^k ≤ downMs + base, plus
 * jitter, capped at the maximum delay.
 */
export function rejoinWindowMs(
  ackTimeoutMs: number,
  downMs: number | undefined,
  backoff: { baseMs: number; maxMs: number; jitter: number } = AGENT_RECONNECT_BACKOFF,
): number {
  if (downMs === undefined) return ackTimeoutMs;
  const nextDelay = Math.min(Math.max(downMs, 0) + backoff.baseMs, backoff.maxMs) * (1 + backoff.jitter);
  return Math.max(ackTimeoutMs, Math.ceil(nextDelay) + REJOIN_MARGIN_MS);
}

export class DispatcherLiveness {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly redis: Redis,
    private readonly instance: string,
    private readonly log: Logger,
    private readonly key: string = LIVENESS_KEY,
  ) {}

  /**
   * At start: how long ago the other instance stamped most recently did (undefined: there is
   * none). That is how long its agents have had no dispatcher: an instance that stamped was
   * listening, and an agent that got through to it started its backoff over. Older entries
   * (the first of a crash loop) say nothing about today's agents. One killed a moment before
   * this start, or a live peer, counts as a moment: either way that asks for the ack window.
   */
  async sinceLastAlive(now: number = Date.now()): Promise<number | undefined> {
    const ages = Object.entries(await this.redis.hgetall(this.key))
      .filter(([field]) => field !== this.instance)
      .map(([, at]) => now - Number(at));
    return ages.length === 0 ? undefined : Math.max(0, Math.min(...ages));
  }

  /** Entries of instances dead for longer than FORGET_AFTER_MS go (a live instance outlived them). */
  async forgetDead(now: number = Date.now()): Promise<void> {
    const all = await this.redis.hgetall(this.key);
    const dead = Object.entries(all).filter(([field, at]) => field !== this.instance && now - Number(at) > FORGET_AFTER_MS);
    if (dead.length > 0) await this.redis.hdel(this.key, ...dead.map(([field]) => field));
  }

  /** Stamps this instance now and every LIVENESS_EVERY_MS; each round forgets the long dead. */
  start(): void {
    const stamp = (): void => {
      this.redis
        .hset(this.key, this.instance, Date.now())
        .then(() => this.forgetDead())
        .catch((err: Error) => this.log.debug({ err: { message: err.message } }, 'could not stamp liveness'));
    };
    stamp();
    this.timer = setInterval(stamp, LIVENESS_EVERY_MS);
    this.timer.unref();
  }

  /** A polite stop: its agents were told to go (1001) and reconnect at once; nothing to wait for. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.redis.hdel(this.key, this.instance).catch(() => undefined);
  }
}
