import { ACK_JOURNAL, ENDED_MESSAGES, WORK_IN_PROGRESS, type Redis } from '@reach/store';

/** How long a DEAD mark is kept: longer than any buffered delivery can still be answered. */
export const ENDED_KEEP_MS = 24 * 3600 * 1000;

// For each message id, in one step with the dispatcher's take script (which refuses an answer
// to a marked message): acked (its ack is in the journal: DELIVERED is on its way), working (its
// agent reports progress), else marked DEAD now. Marks older than the keep time are dropped.
// KEYS[1] ack journal  KEYS[2] work in progress  KEYS[3] ended · ARGV now, keep_ms, ids…
// → one letter per id: a(cked) w(orking) e(nded)
const MARK = `
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[2]))
local out = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  local until_ms = tonumber(redis.call('ZSCORE', KEYS[2], id))
  if redis.call('HEXISTS', KEYS[1], id) == 1 then
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

  constructor(redis: Redis) {
    redis.defineCommand('reachMarkEnded', { numberOfKeys: 3, lua: MARK });
    this.scripts = redis as unknown as MarkCommand;
  }

  async mark(ids: readonly string[], now: number): Promise<EndVerdicts> {
    const acked = new Set<string>();
    const working = new Set<string>();
    const ended = new Set<string>();
    if (ids.length === 0) return { acked, working, ended };
    const letters = await this.scripts.reachMarkEnded(ACK_JOURNAL.acked, WORK_IN_PROGRESS, ENDED_MESSAGES, now, ENDED_KEEP_MS, ...ids);
    ids.forEach((id, i) => (letters[i] === 'a' ? acked : letters[i] === 'w' ? working : ended).add(id));
    return { acked, working, ended };
  }
}
