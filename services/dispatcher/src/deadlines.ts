import { ReachError } from '@reach/core';
import type { Redis } from '@reach/store';
import { keys } from './replay-buffer.js';

/**
 * Claims due deadlines: the ack deadlines of buffered deliveries (`reach:deadlines`) or the
 * wait deadlines of waiting ones (`reach:wait-deadlines`), written with each entry. Every dispatcher instance sweeps; a claim moves the member's score to now + lease
 * inside one script, so of concurrent sweepers exactly one gets each member. The claimer
 * removes the member when the failure is recorded (`done`); if it dies first, the lease runs
 * out and another instance claims the member again — a killed instance's deliveries are
 * still failed over.
 */
const CLAIM = `
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, m in ipairs(due) do redis.call('ZADD', KEYS[1], 'XX', ARGV[3], m) end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {due, first[2] or false}`;

interface ClaimCommand {
  reachClaimDeadlines(key: string, now: number, limit: number, leaseUntil: number): Promise<[string[], string | null]>;
}

/** What one claim got, and when the next member is due (epoch ms; undefined: none left, leases included). */
export interface Claimed {
  members: string[];
  next: number | undefined;
}

export class DeadlineClaims {
  private readonly scripts: ClaimCommand;

  constructor(
    private readonly redis: Redis,
    private readonly leaseMs: number,
    /** The deadlines: the ack deadlines of buffered deliveries, or the wait deadlines of waiting ones. */
    private readonly key: string = keys.deadlines,
  ) {
    redis.defineCommand('reachClaimDeadlines', { numberOfKeys: 1, lua: CLAIM });
    this.scripts = redis as unknown as ClaimCommand;
  }

  /** Members whose deadline is at or before `now`, now leased to this caller. */
  async claim(now: number, limit: number): Promise<string[]> {
    return (await this.claimDue(now, limit)).members;
  }

  /** As `claim`, with the earliest score left after it (the next deadline, or the first lease to run out). */
  async claimDue(now: number, limit: number): Promise<Claimed> {
    try {
      const [members, next] = await this.scripts.reachClaimDeadlines(this.key, now, limit, now + this.leaseMs);
      return { members, next: next === null ? undefined : Number(next) };
    } catch (err) {
      throw new ReachError('DEPENDENCY_UNAVAILABLE', `redis claim deadlines failed: ${(err as Error).message}`, { cause: err });
    }
  }

  async done(members: readonly string[]): Promise<void> {
    if (members.length === 0) return;
    await this.redis.zrem(this.key, ...members);
  }
}
