import { ReachError } from '@reach/core';
import { BatchedCall, GroupCommit } from '@reach/kafka';
import { ACK_JOURNAL, ACKED_LATE_KEEP_MS, ENDED_MESSAGES, WORK_IN_PROGRESS, type Redis } from '@reach/store';
import { ANSWERED_MARKER, ANSWERED_MARKER_TTL_S } from './answer-outcome.js';
import { APPEND_MANY, FAIL_OVER, FILL, TAKE, TAKE_ACKS, TAKE_EXPIRED, TAKE_WAITING } from './buffer-scripts.js';
import { deadlineJson, headOf, midPrefix, parseHead, type EntryHead } from './entry.js';
import { LANES, type LaneIndex, type PerLane } from './lanes.js';

/**
 * Per-agent sequence numbers and replay buffers in Redis (R-C6), shared by every
 * dispatcher instance:
 *
 * - `reach:seq:{agent}`  the agent's last assigned seq (INCR, or one SET per append call). Kept long after the buffer
 *   expires: a reset counter would hand out seqs an agent already saw, and its `last_seq`
 *   would then hide new deliveries.
 * - `reach:buf:{agent}`  sorted set, score = seq, member = the buffer entry (see entry.ts);
 *   un-acked deliveries, expiring REACH_REPLAY_TTL_S after the last write.
 * - `reach:gen:{agent}`  connection generation: the newest connection wins (4001 for older).
 * - `reach:res:{agent}:<message_id>`  the head of an acked entry (envelope fields without the
 *   payload) while its result may still come (reply_to, trace), short-lived; once its outcome
 *   is counted and no result can come, the answered marker for a minute, so the frames that
 *   follow are known as repeats, not late answers (answer-outcome.ts).
 *
 * and the per-target concurrency cap (R-D7) with priority lanes (R-D9): the buffer
 * holds at most the agent's max_concurrency deliveries (sent or about to be, not yet acked,
 * rejected or failed); the rest wait, without a seq, in
 *
 * - `reach:wait:{agent}:HIGH|NORMAL|LOW`  sorted sets, score = arrival order
 *   (`reach:worder:{agent}`, INCR), member = the waiting entry (buffer-scripts.ts);
 * - `reach:wrr:{agent}`  the lanes' round-robin credits (lanes.ts), fields H, N, L;
 * - `reach:wait-deadlines`  when each waiting entry gives up (its budget or expire_at):
 *   score = epoch ms, member = `<agent>|<lane>|<order>`; the deadline sweeper fails those.
 * - `reach:routed:{agent}:<message_id>:<attempt>`  where the delivery went when it was
 *   appended, so that a routed record consumed again is not appended twice (buffer-scripts.ts
 *   APPEND_MANY); short-lived.
 *
 * Every script that frees a slot (ack, reject, result, missed ack deadline) promotes the next
 * waiting entries in the same step, so the cap holds across all dispatcher instances; the
 * caller announces what was promoted (promotions.ts).
 *
 * The `{agent}` hash tag keeps one agent's keys in one Redis Cluster slot, so the scripts
 * that touch several of them stay valid there. Every failure is DEPENDENCY_UNAVAILABLE
 * (retryable): the consume loop retries the batch instead of dead-lettering good records.
 */

interface ScriptCommands {
  reachFailOver(buf: string, deadlines: string, lost: string, agent: string, now: number, ttlMs: number, mark: string): Promise<number>;
  reachAppendMany(numKeys: number, ...keysAndArgs: Array<string | number>): Promise<Array<Array<string | number>>>;
  reachTake(...keysAndArgs: Array<string | number>): Promise<Array<string | number>>;
  reachTakeAcks(numKeys: number, ...keysAndArgs: Array<string | number>): Promise<Array<Array<string | number>>>;
  reachTakeExpired(...keysAndArgs: Array<string | number>): Promise<Array<string | number>>;
  reachFill(...keysAndArgs: Array<string | number>): Promise<Array<string | number>>;
  reachTakeWaiting(...keysAndArgs: Array<string | number>): Promise<string | null>;
}

/** An agent marked lost by failOver: when, and whether it had closed its socket itself with 1000. */
export interface Lost {
  at: number;
  stoppedGracefully: boolean;
}

/** The lost marker's value: the time, `g` after it for a graceful stop. */
export function lostMark(at: number, stoppedGracefully: boolean): string {
  return stoppedGracefully ? `${at}g` : String(at);
}

export function parseLostMark(v: string): Lost {
  return { at: Number.parseInt(v, 10), stoppedGracefully: v.endsWith('g') };
}

/** How long the seq counter and connection generation outlive the last delivery (30 days). */
const COUNTER_TTL_S = 30 * 86400;

/**
 * How long an appended delivery is recognised when its routed record is consumed again. A
 * record comes back only while its offset is uncommitted: kafkajs retrying a failed batch
 * (≈ 60 s: 10 retries, backoff up to 10 s), the group moving the partition after a rebalance
 * or a stop (seconds), a crashed instance's partitions taken over after the session timeout
 * (30 s) or its restart. Longer would only cost memory (one small key per delivery, ≈ 230 B:
 * 1,000 msg/s ≈ 28 MB); a record replayed later still than this is appended again
 * (at-least-once, R-D6).
 */
const APPEND_MARKER_TTL_S = 120;
/** How long a WORK_IN_PROGRESS entry stays after its hold ran out (the stuck sweep only reads live ones). */
const PROGRESS_KEPT_MS = 10 * 60_000;

export const keys = {
  seq: (agent: string) => `reach:seq:{${agent}}`,
  buf: (agent: string) => `reach:buf:{${agent}}`,
  gen: (agent: string) => `reach:gen:{${agent}}`,
  result: (agent: string, messageId: string) => `reach:res:{${agent}}:${messageId}`,
  wait: (agent: string, lane: LaneIndex) => `reach:wait:{${agent}}:${LANES[lane]}`,
  order: (agent: string) => `reach:worder:{${agent}}`,
  credits: (agent: string) => `reach:wrr:{${agent}}`,
  appended: (agent: string, messageId: string, attempt: number) => `reach:routed:{${agent}}:${messageId}:${attempt}`,
  /**
   * Ack deadlines of every buffered delivery of every agent: score = deadline (epoch ms),
   * member = `<agent>|<seq>`. One key (not per agent) so a sweeper finds what is due with one
   * range read; on Redis Cluster it must be split by slot (not needed for one Redis).
   */
  deadlines: 'reach:deadlines',
  /**
   * The ack journal (ack-journal.ts): acks taken whose DELIVERED event is not produced yet.
   * Hash: message id → `<agent>|<seq>|<acked at>|<head>`; sorted set: message id by ack time.
   */
  acked: ACK_JOURNAL.acked,
  ackedAt: ACK_JOURNAL.ackedAt,
  ackedLate: ACK_JOURNAL.ackedLate,
  /** Set when the agent's socket died and did not come back within the grace: epoch ms. */
  lost: (agent: string) => `reach:lost:{${agent}}`,
  /** Wait deadlines of every waiting entry: score = epoch ms, member = `<agent>|<lane>|<order>`. */
  waitDeadlines: 'reach:wait-deadlines',
};

/** An ack taken from the buffer whose DELIVERED event may not be written yet. */
export interface JournaledAck {
  agent: string;
  seq: number;
  ackedAt: number;
  head: string;
}

export function parseJournaledAck(v: string): JournaledAck | undefined {
  const a = v.indexOf('|');
  const b = v.indexOf('|', a + 1);
  const c = v.indexOf('|', b + 1);
  if (a <= 0 || b <= a || c <= b) return undefined;
  return { agent: v.slice(0, a), seq: Number(v.slice(a + 1, b)), ackedAt: Number(v.slice(b + 1, c)), head: v.slice(c + 1) };
}

/** The deadline member of a delivery. */
/** ZADD GT `until` for every member scored below it, 500 at a time. */
/**
 * ZADD GT `until` for every member scored below it, 500 at a time. ARGV[1] is `until`, or with
 * ARGV[2] = '1' how long after Redis's clock now (a call queued while Redis was away must not
 * defer to a moment already past). Returns {moved, until}.
 */
const DEFER_DEADLINES = `
local upto = tonumber(ARGV[1])
if ARGV[2] == '1' then
  local t = redis.call('TIME')
  upto = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + upto
end
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. upto)
for i = 1, #members, 500 do
  local args = {}
  for j = i, math.min(i + 499, #members) do
    args[#args + 1] = upto
    args[#args + 1] = members[j]
  end
  redis.call('ZADD', KEYS[1], 'GT', unpack(args))
end
return {#members, upto}`;

export function deadlineMember(agent: string, seq: number): string {
  return `${agent}|${seq}`;
}

export function parseDeadlineMember(member: string): { agent: string; seq: number } | undefined {
  const bar = member.lastIndexOf('|');
  const seq = Number(member.slice(bar + 1));
  return bar > 0 && Number.isSafeInteger(seq) ? { agent: member.slice(0, bar), seq } : undefined;
}

export function parseWaitMember(member: string): { agent: string; lane: LaneIndex; order: number } | undefined {
  const m = /^(.+)\|(HIGH|NORMAL|LOW)\|(\d+)$/.exec(member);
  if (!m) return undefined;
  return { agent: m[1]!, lane: LANES.indexOf(m[2] as (typeof LANES)[number]) as LaneIndex, order: Number(m[3]) };
}

export interface BufferedEntry {
  seq: number;
  entry: string;
}

/** A pump's read: the entries in seq order. */
export interface BufferRead {
  entries: BufferedEntry[];
}

/** A waiting delivery that got a slot: now in the buffer with its seq and ack deadline. */
export interface Promotion {
  agent: string;
  seq: number;
  entry: string;
  lane: LaneIndex;
  /** When it started waiting (epoch ms). */
  queuedAt: number;
  /** Its ack deadline (epoch ms). */
  deadline: number;
}

/** `head` is the entry's head, or the whole entry when asked for (`whole`). */
export type TakeOutcome =
  | { kind: 'taken'; head: string; promotions: Promotion[] }
  /** Not pending, and nothing says it was answered: past its deadline (failed), or never here. */
  | { kind: 'gone' }
  /** Answered before: acked (its result context waits) or its outcome counted (answer-outcome.ts). */
  | { kind: 'answered' }
  | { kind: 'mismatch' }
  /** The stuck sweep declared the message DEAD: the delivery left the buffer unanswered. */
  | { kind: 'ended'; promotions: Promotion[] };

/** How deliveries of an agent are let through: its cap and the lane weights. */
export interface FlowPolicy {
  /** The agent's max_concurrency; 0 = no cap (an agent the registry view does not know). */
  limitOf(agent: string): number;
  weights: PerLane;
}

/** A routed delivery for `appendMany`. */
export interface AppendItem {
  agent: string;
  messageId: string;
  head: string;
  attempt: number;
  /** The end of its deliver frame (entry.ts messagePart). */
  messagePart: string;
  /** Ack deadline (epoch ms) when it goes out at once. */
  deadline: number;
  /** Ack window (ms) from the moment it is promoted, if it has to wait. */
  windowMs: number;
  /** End of the message's budget (epoch ms): no ack deadline goes past it. */
  budgetAt: number | null;
  lane: LaneIndex;
  /** When a waiting delivery gives up (epoch ms). */
  waitDeadline: number;
}

/**
 * Where a routed delivery went. `repeat`: it had been appended before (its record was consumed
 * again) and is still where it went: in flight with this seq and stored `entry`, or waiting
 * with this order. `moved`: appended before and gone on since (answered, failed, promoted or
 * given up): nothing to do.
 */
export type AppendResult =
  | { kind: 'inflight'; seq: number; repeat: false }
  | { kind: 'inflight'; seq: number; repeat: true; entry: string }
  | { kind: 'waiting'; order: number; repeat: boolean }
  | { kind: 'moved' };

export interface FlowState {
  inFlight: number;
  waiting: PerLane;
}

async function call<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ReachError) throw err;
    throw new ReachError('DEPENDENCY_UNAVAILABLE', `redis ${what} failed: ${(err as Error).message}`, { cause: err });
  }
}

/** Promotions returned flat by the scripts (five values each, from `from`). */
function parsePromotions(agent: string, flat: ReadonlyArray<string | number>, from: number): Promotion[] {
  const out: Promotion[] = [];
  for (let i = from; i + 4 < flat.length; i += 5) {
    out.push({
      agent,
      seq: Number(flat[i]),
      entry: String(flat[i + 1]),
      lane: (Number(flat[i + 2]) - 1) as LaneIndex,
      queuedAt: Number(flat[i + 3]),
      deadline: Number(flat[i + 4]),
    });
  }
  return out;
}

/** Deliveries per script call of the batched scripts: bounds its argument list (Lua's unpack). */
const CALL_CHUNK = 100;

/** The indexes of `items`, grouped per agent in their order, at most CALL_CHUNK per group: one script call each. */
function callsPerAgent(items: ReadonlyArray<{ agent: string }>): number[][] {
  const byAgent = new Map<string, number[]>();
  items.forEach((it, i) => {
    const own = byAgent.get(it.agent);
    if (own) own.push(i);
    else byAgent.set(it.agent, [i]);
  });
  const calls: number[][] = [];
  for (const own of byAgent.values()) for (let i = 0; i < own.length; i += CALL_CHUNK) calls.push(own.slice(i, i + CALL_CHUNK));
  return calls;
}

/** An ack (or a result taken as one) for `takeAck`. */
interface AckTake {
  agent: string;
  seq: number;
  messageId: string;
  ackedAt: number;
}

/** Told of the deadlines the buffer writes, so the deadline sweeper need not poll for them (@reach/service-kit WakeAlarm). */
export interface DeadlineBell {
  /** A deadline at `at` (epoch ms) was written (or pulled forward). */
  ring(at: number): void;
}

export class ReplayBuffer {
  private readonly scripts: ScriptCommands;
  /** Acks whose DELIVERED is produced, leaving the journal together (settleAck). */
  private readonly settles = new GroupCommit<{ id: string; late: boolean }>(async (items) => {
    const ids = items.map((i) => i.id);
    const late = items.filter((i) => i.late).map((i) => i.id);
    const now = Date.now();
    const tx = this.redis
      .multi()
      .hdel(keys.acked, ...ids)
      .zrem(keys.ackedAt, ...ids);
    if (late.length > 0) tx.zadd(keys.ackedLate, ...late.flatMap((id) => [now, id])).zremrangebyscore(keys.ackedLate, '-inf', now - ACKED_LATE_KEEP_MS);
    await call('settle ack', () => tx.exec());
  });

  constructor(
    private readonly redis: Redis,
    private readonly ttlS: number,
    private readonly flow: FlowPolicy = { limitOf: () => 0, weights: [60, 30, 10] },
    private readonly bell: DeadlineBell = { ring: () => undefined },
  ) {
    redis.defineCommand('reachAppendMany', { lua: APPEND_MANY }); // numkeys given per call
    redis.defineCommand('reachTake', { numberOfKeys: 12, lua: TAKE });
    redis.defineCommand('reachTakeAcks', { lua: TAKE_ACKS }); // numkeys given per call
    redis.defineCommand('reachTakeExpired', { numberOfKeys: 9, lua: TAKE_EXPIRED });
    redis.defineCommand('reachFill', { numberOfKeys: 9, lua: FILL });
    redis.defineCommand('reachTakeWaiting', { numberOfKeys: 8, lua: TAKE_WAITING });
    redis.defineCommand('reachFailOver', { numberOfKeys: 3, lua: FAIL_OVER });
    this.scripts = redis as unknown as ScriptCommands;
  }

  /** The promotions of a script's reply; their new ack deadlines ring the bell. */
  private promotionsOf(agent: string, flat: ReadonlyArray<string | number>, from: number): Promotion[] {
    const out = parsePromotions(agent, flat, from);
    if (out.length > 0) this.bell.ring(Math.min(...out.map((p) => p.deadline)));
    return out;
  }

  /** The keys every promoting script starts with (buffer-scripts.ts). */
  private flowKeys(agent: string): string[] {
    return [
      keys.seq(agent),
      keys.buf(agent),
      keys.deadlines,
      keys.wait(agent, 0),
      keys.wait(agent, 1),
      keys.wait(agent, 2),
      keys.credits(agent),
      keys.waitDeadlines,
    ];
  }

  /** The arguments every promoting script starts with: the agent's cap read now (a re-registration applies at once). */
  private flowArgv(agent: string, now: number): Array<string | number> {
    const w = this.flow.weights;
    return [this.flow.limitOf(agent), w[0], w[1], w[2], now, this.ttlS, Math.max(COUNTER_TTL_S, this.ttlS), agent];
  }

  /**
   * Stores each routed delivery: in the agent's buffer with its next seq when the agent has a
   * free slot and nothing waits, else in its priority lane — once: a delivery (agent, message
   * id, attempt) appended before is not appended again (see AppendResult). One script call per
   * agent (at most CALL_CHUNK deliveries each), all in one pipeline; within an agent the order
   * given is kept (one partition owns an agent's records). Deliveries promoted on the way (a
   * raised max_concurrency) come back in `promotions`, for the caller to announce.
   */
  async appendMany(items: readonly AppendItem[], now: number = Date.now()): Promise<{ results: AppendResult[]; promotions: Promotion[] }> {
    if (items.length === 0) return { results: [], promotions: [] };
    const calls = callsPerAgent(items);
    return call('append', async () => {
      const pipe = this.redis.pipeline();
      const p = pipe as unknown as ScriptCommands;
      for (const idx of calls) {
        const agent = items[idx[0]!]!.agent;
        const markers = idx.map((i) => keys.appended(agent, items[i]!.messageId, items[i]!.attempt));
        const args: Array<string | number> = [...this.flowArgv(agent, now), APPEND_MARKER_TTL_S];
        for (const i of idx) {
          const it = items[i]!;
          args.push(
            it.head,
            it.attempt,
            deadlineJson(it.deadline),
            it.messagePart,
            it.deadline,
            Math.max(0, Math.round(it.windowMs)),
            it.budgetAt ?? 0,
            it.lane + 1,
            it.waitDeadline,
            it.messageId,
          );
        }
        void p.reachAppendMany(10 + markers.length, ...this.flowKeys(agent), keys.order(agent), ENDED_MESSAGES, ...markers, ...args);
      }
      const replies = (await pipe.exec()) ?? [];
      const results = new Array<AppendResult>(items.length);
      const promotions: Promotion[] = [];
      replies.forEach(([err, reply], c) => {
        if (err) throw err;
        (reply as Array<Array<string | number>>).forEach((flat, k) => {
          const i = calls[c]![k]!;
          const code = Number(flat[0]);
          if (code > 0) results[i] = { kind: 'inflight', seq: code, repeat: false };
          else if (code === 0) {
            results[i] = { kind: 'waiting', order: Number(flat[1]), repeat: false };
            promotions.push(...this.promotionsOf(items[i]!.agent, flat, 2));
          } else if (code === -1) results[i] = { kind: 'inflight', seq: Number(flat[1]), repeat: true, entry: String(flat[2]) };
          else if (code === -2) results[i] = { kind: 'waiting', order: Number(flat[1]), repeat: true };
          else results[i] = { kind: 'moved' };
        });
      });
      // Each new delivery's ack deadline, or its wait deadline if it waits.
      this.bell.ring(Math.min(...items.map((it) => Math.min(it.deadline, it.waitDeadline))));
      return { results, promotions };
    });
  }

  /**
   * An ack, or a result taken as one: `take` with the context kept and the ack journaled at
   * `ackedAt`. The acks of one macrotask (one socket read holds several) go together, one
   * TAKE_ACKS call per agent; the promotions of a call come back with its first take.
   */
  takeAck(agent: string, seq: number, messageId: string, ackedAt: number): Promise<TakeOutcome> {
    return this.ackTakes.add({ agent, seq, messageId, ackedAt });
  }

  private readonly ackTakes = new BatchedCall<AckTake, TakeOutcome>((items) =>
    call('take', async () => {
      const now = Date.now();
      const calls = callsPerAgent(items);
      const pipe = this.redis.pipeline();
      const p = pipe as unknown as ScriptCommands;
      for (const idx of calls) {
        const agent = items[idx[0]!]!.agent;
        const results = idx.map((i) => keys.result(agent, items[i]!.messageId));
        const acks = idx.flatMap((i) => [items[i]!.seq, midPrefix(items[i]!.messageId), items[i]!.messageId, items[i]!.ackedAt]);
        void p.reachTakeAcks(
          11 + results.length,
          ...this.flowKeys(agent),
          keys.acked,
          keys.ackedAt,
          ENDED_MESSAGES,
          ...results,
          ...this.flowArgv(agent, now),
          ANSWERED_MARKER,
          ANSWERED_MARKER_TTL_S,
          ...acks,
        );
      }
      const replies = (await pipe.exec()) ?? [];
      const outcomes = new Array<TakeOutcome>(items.length);
      replies.forEach(([err, reply], c) => {
        if (err) throw err;
        const flat = reply as Array<Array<string | number>>;
        const idx = calls[c]!;
        let promotions = this.promotionsOf(items[idx[0]!]!.agent, flat[idx.length] ?? [], 0);
        idx.forEach((i, k) => {
          const [status, head] = flat[k]!;
          const kind = Number(status);
          if (kind === 1 || kind === 3) {
            outcomes[i] = kind === 1 ? { kind: 'taken', head: String(head), promotions } : { kind: 'ended', promotions };
            promotions = [];
          } else outcomes[i] = kind === 4 ? { kind: 'answered' } : kind === 2 ? { kind: 'mismatch' } : { kind: 'gone' };
        });
      });
      return outcomes;
    }),
  );

  /** Un-acked entries with seq > afterSeq, oldest first. */
  async readAfter(agent: string, afterSeq: number, limit: number): Promise<BufferRead> {
    return call('read', async () => {
      const flat = await this.redis.zrangebyscore(keys.buf(agent), `(${afterSeq}`, '+inf', 'WITHSCORES', 'LIMIT', 0, limit);
      const entries: BufferedEntry[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) entries.push({ entry: flat[i]!, seq: Number(flat[i + 1]) });
      return { entries };
    });
  }

  /**
   * Removes an acked (or rejected) delivery and returns its head, and what was promoted into
   * the freed slot; only the first of concurrent takes gets it. `keepContext`: keep the head
   * for a result that may follow (acks, not rejects). `ackedAt`: this is an ack, journaled with
   * the take until its DELIVERED event is produced (settleAck).
   */
  async take(
    agent: string,
    seq: number,
    messageId: string,
    keepContext: boolean,
    whole = false,
    now: number = Date.now(),
    ackedAt?: number,
  ): Promise<TakeOutcome> {
    const r = await call('take', () =>
      this.scripts.reachTake(
        ...this.flowKeys(agent),
        keys.result(agent, messageId),
        keys.acked,
        keys.ackedAt,
        ENDED_MESSAGES,
        ...this.flowArgv(agent, now),
        seq,
        midPrefix(messageId),
        keepContext ? '1' : '0',
        deadlineMember(agent, seq),
        whole ? '1' : '0',
        ackedAt === undefined ? '' : ackedAt,
        messageId,
        ANSWERED_MARKER,
        ANSWERED_MARKER_TTL_S,
      ),
    );
    const status = Number(r[0]);
    if (status === 1) return { kind: 'taken', head: String(r[1]), promotions: this.promotionsOf(agent, r, 2) };
    if (status === 3) return { kind: 'ended', promotions: this.promotionsOf(agent, r, 2) };
    if (status === 4) return { kind: 'answered' };
    return status === 2 ? { kind: 'mismatch' } : { kind: 'gone' };
  }

  /**
   * The delivery's outcome is counted and no result can follow any more (a result produced, a
   * late result counted): later frames about it are repeats (answer-outcome.ts). `onlyIfNew`:
   * keep what is there (a context a concurrent ack just stored).
   */
  async markAnswered(agent: string, messageId: string, onlyIfNew = false): Promise<void> {
    const key = keys.result(agent, messageId);
    await call('mark answered', () =>
      onlyIfNew ? this.redis.set(key, ANSWERED_MARKER, 'EX', ANSWERED_MARKER_TTL_S, 'NX') : this.redis.set(key, ANSWERED_MARKER, 'EX', ANSWERED_MARKER_TTL_S),
    );
  }

  /**
   * Removes and returns the un-acked entry with this seq (its deadline passed), and what was
   * promoted into the freed slot; undefined when it was answered meanwhile.
   */
  async takeExpired(agent: string, seq: number, now: number = Date.now()): Promise<{ entry: string; promotions: Promotion[] } | undefined> {
    const r = await call('take expired', () => this.scripts.reachTakeExpired(...this.flowKeys(agent), ENDED_MESSAGES, ...this.flowArgv(agent, now), seq));
    const entry = String(r[0]);
    return entry === '' ? undefined : { entry, promotions: this.promotionsOf(agent, r, 1) };
  }

  /**
   * Puts an entry taken by `takeExpired` back (its failure could not be recorded). Until it is
   * failed again the agent may have one delivery more than its cap: the slot was refilled.
   */
  async restore(agent: string, seq: number, entry: string): Promise<void> {
    await call('restore', () => this.redis.zadd(keys.buf(agent), seq, entry));
  }

  /** Promotes waiting deliveries into whatever slots are free. */
  async fill(agent: string, now: number = Date.now()): Promise<Promotion[]> {
    const r = await call('fill', () => this.scripts.reachFill(...this.flowKeys(agent), ENDED_MESSAGES, ...this.flowArgv(agent, now)));
    return this.promotionsOf(agent, r, 0);
  }

  /** Removes and returns a waiting entry whose wait deadline passed; undefined when promoted meanwhile. */
  async takeWaiting(agent: string, lane: LaneIndex, order: number, now: number = Date.now()): Promise<string | undefined> {
    return call(
      'take waiting',
      async () => (await this.scripts.reachTakeWaiting(...this.flowKeys(agent), ...this.flowArgv(agent, now), lane + 1, order)) ?? undefined,
    );
  }

  /** Puts a waiting entry taken by `takeWaiting` back in its place (its failure could not be recorded). */
  async restoreWaiting(agent: string, lane: LaneIndex, order: number, member: string): Promise<void> {
    await call('restore waiting', () => this.redis.zadd(keys.wait(agent, lane), order, member));
  }

  /** How many deliveries of the agent are in flight and waiting, per lane. */
  async flowState(agent: string): Promise<FlowState> {
    return call('flow state', async () => {
      const res =
        (await this.redis.multi().zcard(keys.buf(agent)).zcard(keys.wait(agent, 0)).zcard(keys.wait(agent, 1)).zcard(keys.wait(agent, 2)).exec()) ?? [];
      const n = res.map(([err, v]) => {
        if (err) throw err;
        return Number(v);
      });
      return { inFlight: n[0] ?? 0, waiting: [n[1] ?? 0, n[2] ?? 0, n[3] ?? 0] };
    });
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
      const [[err, gen] = [null, 0]] =
        (await this.redis.multi().incr(keys.gen(agent)).expire(keys.gen(agent), COUNTER_TTL_S).del(keys.lost(agent)).exec()) ?? [];
      if (err) throw err;
      return Number(gen);
    });
  }

  /**
   * The agent's socket died and it did not reconnect in time: every un-acked delivery's ack
   * deadline moves to `now` (never later than it was), so the deadline sweeper fails them over
   * to another candidate right away, and the agent is marked lost so the failure says why
   * (1002). Returns how many deliveries were pulled forward.
   */
  async failOver(agent: string, now: number = Date.now(), stoppedGracefully = false): Promise<number> {
    const pulled = await call('fail over', async () =>
      Number(
        await this.scripts.reachFailOver(keys.buf(agent), keys.deadlines, keys.lost(agent), agent, now, this.ttlS * 1000, lostMark(now, stoppedGracefully)),
      ),
    );
    if (pulled > 0) this.bell.ring(now);
    return pulled;
  }

  /**
   * A `progress` frame: the delivery's ack deadline moves to `until` if it is still in flight
   * (`XX`) and that is later (`GT`). 'mismatch' when the seq holds another message.
   */
  async extendDeadline(
    agent: string,
    seq: number,
    messageId: string,
    windowOf: (head: EntryHead) => number,
    now: number = Date.now(),
  ): Promise<'extended' | 'unchanged' | 'mismatch'> {
    const entry = await this.peek(agent, seq);
    if (entry === undefined) return 'unchanged'; // answered meanwhile
    const head = parseHead(headOf(entry));
    if (!head || head.mid !== messageId) return 'mismatch';
    const until = now + windowOf(head);
    const changed = await call('extend deadline', () => this.redis.zadd(keys.deadlines, 'XX', 'GT', 'CH', until, deadlineMember(agent, seq)));
    if (Number(changed) === 0) return 'unchanged';
    // The stuck sweep reads this (WORK_IN_PROGRESS); entries long past are dropped on the way.
    await call('record progress', () =>
      this.redis
        .multi()
        .zadd(WORK_IN_PROGRESS, 'GT', until, messageId)
        .zremrangebyscore(WORK_IN_PROGRESS, '-inf', now - PROGRESS_KEPT_MS)
        .exec(),
    );
    return 'extended';
  }

  /**
   * Pushes the ack deadlines of deliveries not yet sent out to `until` each (never earlier than
   * they are; gone ones are skipped: XX). Used while their DELIVERING produce waits on Kafka:
   * the agent's ack window starts when the delivery goes out, not when it was stored.
   */
  async holdDeadlines(items: ReadonlyArray<{ agent: string; seq: number; until: number }>): Promise<void> {
    if (items.length === 0) return;
    const pipe = this.redis.pipeline();
    for (const it of items) pipe.zadd(keys.deadlines, 'XX', 'GT', it.until, deadlineMember(it.agent, it.seq));
    await call('hold deadlines', () => pipe.exec());
  }

  /**
   * At a dispatcher's start: every ack deadline that passes before `until` is pushed to it
   * (never earlier: GT). A dispatcher that died took its agents' sockets with it, and nobody
   * swept its deadlines while it was down; its agents now reconnect and send again the acks
   * their dead socket swallowed (the SDKs resend recent answers). Sweeping first would retry
   * those deliveries on other agents while the first ones had done the work (`pnpm chaos`:
   * tasks run twice after a dispatcher took 18 s to restart). Resolves to how many moved.
   */
  async deferDeadlinesTo(until: number): Promise<number> {
    const [moved] = (await call('defer deadlines', () => this.redis.eval(DEFER_DEADLINES, 1, keys.deadlines, until, '0'))) as number[];
    return Number(moved);
  }

  /**
   * The same, `forMs` from Redis's own clock when the script runs: after an outage the call
   * may wait for Redis to come back, and an `until` taken before it could already be past.
   */
  async deferDeadlinesFor(forMs: number): Promise<{ moved: number; until: number }> {
    const [moved, until] = (await call('defer deadlines', () => this.redis.eval(DEFER_DEADLINES, 1, keys.deadlines, forMs, '1'))) as number[];
    return { moved: Number(moved), until: Number(until) };
  }

  /**
   * Deliveries just stored for agents whose socket died and that did not come back (marked lost
   * by failOver; the router still saw them live): their deadlines are pulled to `now`, so the
   * sweeper fails them over to another candidate (1002) at once, not at their ack deadline.
   * Resolves to how many were pulled.
   */
  async pullDeadlinesOfLost(items: ReadonlyArray<{ agent: string; seq: number }>, now: number = Date.now()): Promise<number> {
    if (items.length === 0) return 0;
    const agents = [...new Set(items.map((i) => i.agent))];
    // One EXISTS per agent (each its own hash slot), in one round trip.
    const got = await call('read lost', () => agents.reduce((p, a) => p.exists(keys.lost(a)), this.redis.pipeline()).exec());
    const lost = new Set(agents.filter((_, i) => Number(got?.[i]?.[1] ?? 0) > 0));
    const pulled = items.filter((i) => lost.has(i.agent));
    if (pulled.length === 0) return 0;
    const pipe = this.redis.pipeline();
    for (const it of pulled) pipe.zadd(keys.deadlines, 'XX', 'LT', now, deadlineMember(it.agent, it.seq));
    await call('pull deadlines', () => pipe.exec());
    this.bell.ring(now);
    return pulled.length;
  }

  /**
   * The ack's DELIVERED event is produced: it leaves the journal. The acks settled while one
   * settle is on its way leave together (one HDEL and one ZREM for all of them), not as two
   * commands and a MULTI each. `late`: produced at or after the message's budget end
   * (settledLate), so it is remembered for the stuck sweep (ACK_JOURNAL.ackedLate).
   */
  settleAck(messageId: string, late = false): Promise<void> {
    return this.settles.add([{ id: messageId, late }]);
  }

  /** Journaled acks by message id (undefined: not journaled, or its DELIVERED is written). */
  async journaledAcks(messageIds: readonly string[]): Promise<Array<JournaledAck | undefined>> {
    if (messageIds.length === 0) return [];
    const values = await call('read acks', () => this.redis.hmget(keys.acked, ...messageIds));
    return values.map((v) => (v === null ? undefined : parseJournaledAck(v)));
  }

  /** When the agent was marked lost (failOver), and whether it had stopped gracefully, if it has not connected since. */
  async lostAt(agent: string): Promise<Lost | undefined> {
    const v = await call('get lost', () => this.redis.get(keys.lost(agent)));
    return v === null ? undefined : parseLostMark(v);
  }

  async generation(agent: string): Promise<number> {
    return call('get gen', async () => Number((await this.redis.get(keys.gen(agent))) ?? 0));
  }

  async resultContext(agent: string, messageId: string): Promise<string | null> {
    return call('get result context', () => this.redis.get(keys.result(agent, messageId)));
  }
}
