import { ReachError } from '@reach/core';
import { ACK_JOURNAL, ENDED_MESSAGES, WORK_IN_PROGRESS, type Redis } from '@reach/store';

/** How long a DEAD mark is kept: longer than any buffered delivery can still be answered. */
export const ENDED_KEEP_MS = 24 * 3600 * 1000;

/**
 * After Redis was away, how long it must answer again before messages are marked: acks the
 * dispatchers received meanwhile are tried again until Redis takes them (every ≤ 1 s, once
 * their client has reconnected, ≤ 5 s), and one that lands after the mark is refused — DEAD
 * though acked (`pnpm chaos --long`: 9 messages marked 0.1 s after Redis came back, their acks
 * stored 2 s later).
 */
export const REJOIN_MS = 7_000;
/** An answer slower than this means the client waited for Redis to come back. */
const SLOW_ANSWER_MS = 1_000;

// For each message id, in one step with the dispatcher's take script (which refuses an answer
// to a marked message): acked (its ack is in the journal: DELIVERED is on its way; or it left
// the journal after the budget's end: DELIVERED written where the read-model watermark does not
// reach), working (its agent reports progress), else marked DEAD now. Marks older than the
// keep time are dropped.
// KEYS[1] ack journal  KEYS[2] work in progress  KEYS[3] ended  KEYS[4] acks settled late
// ARGV now, keep_ms, ids… → one letter per id: a(cked) w(orking) e(nded)
const MARK = `
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[2]))
local out = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  local until_ms = tonumber(redis.call('ZSCORE', KEYS[2], id))
  if redis.call('HEXISTS', KEYS[1], id) == 1 or redis.call('ZSCORE', KEYS[4], id) then
    out[#out + 1] = 'a'
  elseif until_ms and until_ms > now then
    out[#out + 1] = 'w'
  else
    redis.call('ZADD', KEYS[3], now, id)
    out[#out + 1] = 'e'
  end
end
return table.concat(out)`;

export interface EndVerdicts {
  /** Acked by their agent: their DELIVERED is on its way. */
  acked: ReadonlySet<string>;
  /** Their agent reports progress right now: a long task, not stuck. */
  working: ReadonlySet<string>;
  /** Marked DEAD: from now on the dispatcher refuses their answers. */
  ended: ReadonlySet<string>;
}

interface MarkCommand {
  reachMarkEnded(...keysAndArgs: Array<string | number>): Promise<string>;
}

/**
 * The stuck sweep's last check before it declares messages DEAD, atomic with the dispatcher's
 * takes: an ack either reached the journal first (the message is left alone) or comes after
 * the mark (refused: the message stays DEAD). Throws when Redis cannot answer.
 */
export class EndMarks {
  private readonly scripts: MarkCommand;
  /** Set once a mark failed (Redis away); cleared when Redis has answered again for REJOIN_MS. */
  private away: { backAt: number | undefined } | undefined;

  constructor(private readonly redis: Redis) {
    redis.defineCommand('reachMarkEnded', { numberOfKeys: 4, lua: MARK });
    this.scripts = redis as unknown as MarkCommand;
  }

  /**
   * Whether the message is marked ended: canceled by its sender (A2A CancelTask) or declared
   * DEAD by a stuck sweep. A retry request of such a message is not re-published: its end is
   * recorded, and another attempt would run a canceled task. Throws when Redis cannot answer
   * (the request is handled again).
   */
  async isEnded(messageId: string): Promise<boolean> {
    try {
      return (await this.redis.zscore(ENDED_MESSAGES, messageId)) !== null;
    } catch (err) {
      throw new ReachError('DEPENDENCY_UNAVAILABLE', `could not read the end mark of ${messageId}: ${(err as Error).message}`, { cause: err });
    }
  }

  async mark(ids: readonly string[], now: number): Promise<EndVerdicts> {
    const acked = new Set<string>();
    const working = new Set<string>();
    const ended = new Set<string>();
    if (ids.length === 0) return { acked, working, ended };
    await this.rejoined(now);
    let letters: string;
    try {
      letters = await this.scripts.reachMarkEnded(ACK_JOURNAL.acked, WORK_IN_PROGRESS, ENDED_MESSAGES, ACK_JOURNAL.ackedLate, now, ENDED_KEEP_MS, ...ids);
    } catch (err) {
      this.away = { backAt: undefined };
      throw err;
    }
    ids.forEach((id, i) => (letters[i] === 'a' ? acked : letters[i] === 'w' ? working : ended).add(id));
    return { acked, working, ended };
  }

  /**
   * Throws (the round is skipped) while Redis is away, or answers again — after this client
   * lost it, or after a restart (its uptime) — for less than REJOIN_MS.
   */
  private async rejoined(now: number): Promise<void> {
    let uptimeS: number;
    const asked = Date.now();
    try {
      uptimeS = Number(/uptime_in_seconds:(\d+)/.exec(await this.redis.info('server'))?.[1] ?? Infinity);
    } catch (err) {
      this.away = { backAt: undefined };
      throw err;
    }
    // A slow answer waited in the client's offline queue: Redis was away until just now.
    if (Date.now() - asked > SLOW_ANSWER_MS) {
      this.away = { backAt: undefined };
      throw new ReachError('DEPENDENCY_UNAVAILABLE', `Redis answered after ${Date.now() - asked} ms: it was away; no message is marked DEAD this round`);
    }
    if (this.away) this.away.backAt ??= now;
    const backAt = Math.max(this.away?.backAt ?? -Infinity, now - uptimeS * 1000);
    const left = Math.ceil(backAt + REJOIN_MS - now);
    if (left > 0) {
      throw new ReachError(
        'DEPENDENCY_UNAVAILABLE',
        `Redis answers again since ${Math.round(now - backAt)} ms: no message is marked DEAD for another ${left} ms, while the acks stored meanwhile land`,
      );
    }
    this.away = undefined;
  }
}
