import { ReachError } from '@reach/core';
import type { Redis } from '@reach/store';
import { midPrefix } from './entry.js';

/**
 * Per-agent sequence numbers and replay buffers in Redis (SPEC R-C6), shared by every
 * dispatcher instance:
 *
 * - `reach:seq:{agent}`  the agent's last assigned seq (INCR). Kept long after the buffer
 *   expires: a reset counter would hand out seqs an agent already saw, and its `last_seq`
 *   would then hide new deliveries.
 * - `reach:buf:{agent}`  sorted set, score = seq, member = the buffer entry (see entry.ts);
 *   un-acked deliveries, expiring REACH_REPLAY_TTL_S after the last write.
 * - `reach:gen:{agent}`  connection generation: the newest connection wins (4001 for older).
 * - `reach:res:{agent}:<message_id>`  the head of an acked entry (envelope fields without the
 *   payload) while its result may still come (reply_to, trace), short-lived.
 *
 * The `{agent}` hash tag keeps one agent's keys in one Redis Cluster slot, so the scripts
 * that touch several of them stay valid there. Every failure is DEPENDENCY_UNAVAILABLE
 * (retryable): the consume loop retries the batch instead of dead-lettering good records.
 */

// The ack deadline is registered in the same script as the entry (KEYS[3], member
// `<agent>|<seq>`), so no buffered delivery is ever without a deadline.
const APPEND = `
local seq = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
local entry = ARGV[1] .. '\\n{"type":"deliver","seq":' .. seq .. ARGV[2]
redis.call('ZADD', KEYS[2], seq, entry)
redis.call('EXPIRE', KEYS[2], ARGV[3])
if ARGV[5] ~= '' then redis.call('ZADD', KEYS[3], ARGV[5], ARGV[6] .. '|' .. seq) end
return seq`;

// Removes the entry with this seq if it is the named message and returns its head (first
// line); nil when there is none (already acked), 0 when the seq holds another message. With
// ARGV[3] = '1' the head is also kept as the message's result context for its ctx_ttl_s.
// The delivery's deadline (KEYS[3], member ARGV[4]) goes too; ARGV[5] = '1' returns the whole
// entry instead of its head (a retried reject needs the payload).
const TAKE = `
local m = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[1])
if #m == 0 then return false end
local e = m[1]
if string.sub(e, 1, #ARGV[2]) ~= ARGV[2] then return 0 end
redis.call('ZREM', KEYS[1], e)
local nl = string.find(e, '\\n', 1, true)
local head = string.sub(e, 1, nl - 1)
if ARGV[3] == '1' then
  local ok, h = pcall(cjson.decode, head)
  local ttl = ok and tonumber(h['ctx_ttl_s']) or 0
  if ttl and ttl > 0 then redis.call('SET', KEYS[2], head, 'EX', math.floor(ttl)) end
end
redis.call('ZREM', KEYS[3], ARGV[4])
if ARGV[5] == '1' then return e end
return head`;

// The deadline sweeper's take: removes the entry with this seq whatever message it holds and
// returns it whole (the retry needs the payload); nil when it was answered meanwhile.
const TAKE_EXPIRED = `
local m = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[1])
if #m == 0 then return false end
redis.call('ZREM', KEYS[1], m[1])
return m[1]`;

interface ScriptCommands {
  reachAppend(
    seqKey: string,
    bufKey: string,
    deadlinesKey: string,
    head: string,
    suffix: string,
    bufTtlS: number,
    seqTtlS: number,
    deadline: number | '',
    agent: string,
  ): Promise<number>;
  reachTake(
    bufKey: string,
    resultKey: string,
    deadlinesKey: string,
    seq: number,
    prefix: string,
    keep: '0' | '1',
    member: string,
    whole: '0' | '1',
  ): Promise<string | number | null>;
  reachTakeExpired(bufKey: string, seq: number): Promise<string | null>;
}

/** How long the seq counter and connection generation outlive the last delivery (30 days). */
const COUNTER_TTL_S = 30 * 86400;

export const keys = {
  seq: (agent: string) => `reach:seq:{${agent}}`,
  buf: (agent: string) => `reach:buf:{${agent}}`,
  gen: (agent: string) => `reach:gen:{${agent}}`,
  result: (agent: string, messageId: string) => `reach:res:{${agent}}:${messageId}`,
  /**
   * Ack deadlines of every buffered delivery of every agent: score = deadline (epoch ms),
   * member = `<agent>|<seq>`. One key (not per agent) so a sweeper finds what is due with one
   * range read; on Redis Cluster it must be split by slot (not needed for one Redis).
   */
  deadlines: 'reach:deadlines',
};

/** The deadline member of a delivery. */
export function deadlineMember(agent: string, seq: number): string {
  return `${agent}|${seq}`;
}

export function parseDeadlineMember(member: string): { agent: string; seq: number } | undefined {
  const bar = member.lastIndexOf('|');
  const seq = Number(member.slice(bar + 1));
  return bar > 0 && Number.isSafeInteger(seq) ? { agent: member.slice(0, bar), seq } : undefined;
}

export interface BufferedEntry {
  seq: number;
  entry: string;
}

/** `head` is the entry's head, or the whole entry when asked for (`whole`). */
export type TakeOutcome = { kind: 'taken'; head: string } | { kind: 'gone' } | { kind: 'mismatch' };

async function call<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ReachError) throw err;
    throw new ReachError('DEPENDENCY_UNAVAILABLE', `redis ${what} failed: ${(err as Error).message}`, { cause: err });
  }
}

export class ReplayBuffer {
  private readonly scripts: ScriptCommands;

  constructor(
    private readonly redis: Redis,
    private readonly ttlS: number,
  ) {
    redis.defineCommand('reachAppend', { numberOfKeys: 3, lua: APPEND });
    redis.defineCommand('reachTake', { numberOfKeys: 3, lua: TAKE });
    redis.defineCommand('reachTakeExpired', { numberOfKeys: 1, lua: TAKE_EXPIRED });
    this.scripts = redis as unknown as ScriptCommands;
  }

  /**
   * Assigns the next seq of each delivery's agent and stores the entry, in one pipeline.
   * Within an agent the seqs follow the order given (one partition owns an agent's records).
   */
  async appendMany(items: ReadonlyArray<{ agent: string; head: string; suffix: string; deadline?: number }>): Promise<number[]> {
    if (items.length === 0) return [];
    return call('append', async () => {
      const pipe = this.redis.pipeline();
      const p = pipe as unknown as ScriptCommands;
      for (const it of items)
        void p.reachAppend(
          keys.seq(it.agent),
          keys.buf(it.agent),
          keys.deadlines,
          it.head,
          it.suffix,
          this.ttlS,
          Math.max(COUNTER_TTL_S, this.ttlS),
          it.deadline ?? '',
          it.agent,
        );
      const results = (await pipe.exec()) ?? [];
      return results.map(([err, seq]) => {
        if (err) throw err;
        return Number(seq);
      });
    });
  }

  /** Un-acked entries with seq > afterSeq, oldest first. */
  async readAfter(agent: string, afterSeq: number, limit: number): Promise<BufferedEntry[]> {
    return call('read', async () => {
      const flat = await this.redis.zrangebyscore(keys.buf(agent), `(${afterSeq}`, '+inf', 'WITHSCORES', 'LIMIT', 0, limit);
      const out: BufferedEntry[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) out.push({ entry: flat[i]!, seq: Number(flat[i + 1]) });
      return out;
    });
  }

  /**
   * Removes an acked (or rejected) delivery and returns its head; only the first of concurrent
   * takes gets it. `keepContext`: keep the head for a result that may follow (acks, not rejects).
   */
  async take(agent: string, seq: number, messageId: string, keepContext: boolean, whole = false): Promise<TakeOutcome> {
    const r = await call('take', () =>
      this.scripts.reachTake(
        keys.buf(agent),
        keys.result(agent, messageId),
        keys.deadlines,
        seq,
        midPrefix(messageId),
        keepContext ? '1' : '0',
        deadlineMember(agent, seq),
        whole ? '1' : '0',
      ),
    );
    if (typeof r === 'string') return { kind: 'taken', head: r };
    return r === 0 ? { kind: 'mismatch' } : { kind: 'gone' };
  }

  /** Removes and returns the un-acked entry with this seq (its deadline passed); undefined when answered. */
  async takeExpired(agent: string, seq: number): Promise<string | undefined> {
    return call('take expired', async () => (await this.scripts.reachTakeExpired(keys.buf(agent), seq)) ?? undefined);
  }

  /** Puts an entry taken by `takeExpired` back (its failure could not be recorded). */
  async restore(agent: string, seq: number, entry: string): Promise<void> {
    await call('restore', () => this.redis.zadd(keys.buf(agent), seq, entry));
  }

  /** The entry with this seq, if it is still un-acked. */
  async peek(agent: string, seq: number): Promise<string | undefined> {
    return call('peek', async () => (await this.redis.zrangebyscore(keys.buf(agent), seq, seq))[0]);
  }

  async currentSeq(agent: string): Promise<number> {
    return call('get seq', async () => Number((await this.redis.get(keys.seq(agent))) ?? 0));
  }

  /** Opens a new connection generation for the agent; older connections must close. */
  async nextGeneration(agent: string): Promise<number> {
    return call('incr gen', async () => {
      const [[err, gen] = [null, 0]] = (await this.redis.multi().incr(keys.gen(agent)).expire(keys.gen(agent), COUNTER_TTL_S).exec()) ?? [];
      if (err) throw err;
      return Number(gen);
    });
  }

  async generation(agent: string): Promise<number> {
    return call('get gen', async () => Number((await this.redis.get(keys.gen(agent))) ?? 0));
  }

  async resultContext(agent: string, messageId: string): Promise<string | null> {
    return call('get result context', () => this.redis.get(keys.result(agent, messageId)));
  }
}
