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
 * instance reads how long ago the dead ones last did (`lastDeath`): its start-up deferral of
 * the ack deadlines (dispatcher.ts) then covers the reconnect backoff that downtime implies
 * (`rejoinWindowMs`), not just one ack window.
 */
export const LIVENESS_KEY = 'reach:dispatchers';
export const LIVENESS_EVERY_MS = 1_000;
/** An instance that has not stamped itself for this long is dead. */
export const DEAD_AFTER_MS = 3_000;

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
   * How long ago the longest-dead instance last stamped itself (undefined: none is dead). The
   * dead ones' entries are removed: the next start does not count them again.
   */
  async lastDeath(now: number = Date.now()): Promise<number | undefined> {
    const all = await this.redis.hgetall(this.key);
    const dead = Object.entries(all).filter(([field, at]) => field !== this.instance && now - Number(at) > DEAD_AFTER_MS);
    if (dead.length === 0) return undefined;
    await this.redis.hdel(this.key, ...dead.map(([field]) => field));
    return Math.max(...dead.map(([, at]) => now - Number(at)));
  }

  start(): void {
    const stamp = (): void => {
      this.redis.hset(this.key, this.instance, Date.now()).catch((err: Error) => this.log.debug({ err: { message: err.message } }, 'could not stamp liveness'));
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
