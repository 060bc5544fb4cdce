import pg from 'pg';
import type { Ledger } from './ledger.js';

/**
 * The verdict of a run, Jepsen-style: every accepted message is looked up in the read model
 * (PostgreSQL `messages` with their timelines, written by the tracker) and set against what the
 * agents saw. Counts, not samples.
 */
export interface Verdict {
  accepted: number;
  refused: number;
  /** Accepted, never seen by an agent, unknown to the read model. */
  lost: number;
  /** Idempotency keys whose handler ran to completion more than once (agents killed mid-handler excepted). */
  duplicatedKeys: number;
  duplicateExecutions: number;
  /** Keys run again after their first execution was cut off by a killed agent: at-least-once, expected. */
  rerunAfterKill: number;
  notTerminal: number;
  deadThoughAcked: number;
  illegalTransitions: number;
  delivered: number;
  dead: number;
  rejected: number;
  /** Deliveries agents saw beyond one per message, per delivered message. */
  redeliveryRate: number;
  examples: Record<string, string[]>;
}

const TERMINAL = new Set(['DELIVERED', 'REJECTED', 'DEAD']);
const RANK: Record<string, number> = { PENDING: 0, ROUTED: 1, DELIVERING: 2, DELIVERED: 3, REJECTED: 3, DEAD: 3 };
const CHUNK = 5_000;

async function inChunks<T>(ids: readonly string[], fn: (chunk: string[]) => Promise<T[]>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < ids.length; i += CHUNK) out.push(...(await fn(ids.slice(i, i + CHUNK))));
  return out;
}

/**
 * When a restarted stage handled its first record: the earliest status event the new process
 * (its instance id ends in its pid) wrote for one of `ids` after the kill at `after`. Only the
 * pipeline stages write status events (ingress PENDING, router ROUTED, dispatcher DELIVERING and
 * the outcomes), so for the others there is no such event; undefined then, or if none came.
 * (Instance ids end in the pid on a one-instance stack; `reach up --instances N` names them by
 * port, so there this finds no event.)
 */
export async function firstHandledBy(db: pg.Pool, ids: readonly string[], service: string, pid: number, after: number): Promise<number | undefined> {
  const firsts = await inChunks(
    ids,
    async (chunk) =>
      (
        await db.query<{ at: Date | null }>(
          'SELECT min(at) AS at FROM message_timeline WHERE message_id = ANY($1) AND service = $2 AND instance LIKE $3 AND at > $4',
          [chunk, service, `%-${pid}`, new Date(after)],
        )
      ).rows,
  );
  const times = firsts.flatMap((r) => (r.at ? [r.at.getTime()] : []));
  return times.length > 0 ? Math.min(...times) : undefined;
}

/** Statuses of the accepted messages now (for the drain wait and the verdict). */
export async function statuses(db: pg.Pool, ids: readonly string[]): Promise<Map<string, string>> {
  const rows = await inChunks(
    ids,
    async (chunk) =>
      (await db.query<{ message_id: string; status: string }>('SELECT message_id, status FROM messages WHERE message_id = ANY($1)', [chunk])).rows,
  );
  return new Map(rows.map((r) => [r.message_id, r.status]));
}

/**
 * Illegal transitions in one message's timeline (events by time): a message has at most one
 * final outcome (DELIVERED or DEAD) and one agent it was DELIVERED by; within an attempt the
 * state never moves back. An event that repeats one the attempt already has (same state, same
 * agent) is a stage's at-least-once replay after a crash, not a transition: the read model
 * folds it away.
 */
export function illegalIn(events: ReadonlyArray<{ state: string; attempt: number; agent_id: string | null }>): string | undefined {
  const finals = new Set(events.filter((e) => e.state === 'DELIVERED' || e.state === 'DEAD').map((e) => e.state));
  if (finals.size > 1) return 'both DELIVERED and DEAD';
  const deliveredBy = new Set(events.filter((e) => e.state === 'DELIVERED').map((e) => e.agent_id));
  if (deliveredBy.size > 1) return `DELIVERED by ${deliveredBy.size} agents`;
  const reached = new Map<number, number>();
  const had = new Set<string>();
  for (const e of events) {
    const seen = `${e.attempt}|${e.state}|${e.agent_id ?? ''}`;
    const before = reached.get(e.attempt);
    if (before !== undefined && RANK[e.state]! < before && !had.has(seen)) return `attempt ${e.attempt} went back to ${e.state}`;
    had.add(seen);
    reached.set(e.attempt, Math.max(before ?? 0, RANK[e.state]!));
  }
  return undefined;
}

export async function verify(db: pg.Pool, ledger: Ledger): Promise<Verdict> {
  const ids = [...ledger.accepted.keys()];
  const status = await statuses(db, ids);
  const events = await inChunks(
    ids,
    async (chunk) =>
      (
        await db.query<{ message_id: string; state: string; attempt: number; agent_id: string | null }>(
          'SELECT message_id, state, attempt, agent_id FROM message_timeline WHERE message_id = ANY($1) ORDER BY message_id, at, event_id',
          [chunk],
        )
      ).rows,
  );
  const timeline = new Map<string, Array<{ state: string; attempt: number; agent_id: string | null }>>();
  for (const e of events) {
    let list = timeline.get(e.message_id);
    if (!list) timeline.set(e.message_id, (list = []));
    list.push(e);
  }
  const examples: Record<string, string[]> = {};
  const note = (what: string, id: string) => {
    const list = (examples[what] ??= []);
    if (list.length < 5) list.push(id);
  };
  let lost = 0;
  let notTerminal = 0;
  let deadThoughAcked = 0;
  let illegal = 0;
  const counts = { DELIVERED: 0, DEAD: 0, REJECTED: 0 };
  for (const id of ids) {
    const s = status.get(id);
    if (s === undefined && !ledger.firstSeen.has(id)) {
      lost++;
      note('lost', id);
    } else if (s === undefined || !TERMINAL.has(s)) {
      notTerminal++;
      note('not terminal', `${id} (${s ?? 'unknown to the read model'})`);
    } else {
      counts[s as keyof typeof counts]++;
      if (s === 'DEAD' && ledger.answered.has(id)) {
        deadThoughAcked++;
        note('DEAD though acked', id);
      }
    }
    const why = illegalIn(timeline.get(id) ?? []);
    if (why) {
      illegal++;
      note('illegal transition', `${id}: ${why}`);
    }
  }
  let duplicatedKeys = 0;
  let duplicateExecutions = 0;
  let rerunAfterKill = 0;
  for (const [key, runs] of ledger.executions) {
    const completed = runs.filter((r) => r.doneAt !== null);
    if (completed.length > 1) {
      duplicatedKeys++;
      duplicateExecutions += completed.length - 1;
      note('duplicated', `${key} (${completed.map((r) => r.tag).join(', ')})`);
    }
    if (runs.some((r) => r.doneAt === null && ledger.killedAt.has(r.tag)) && completed.length > 0) rerunAfterKill++;
  }
  const seenMessages = ledger.firstSeen.size;
  return {
    accepted: ids.length,
    refused: ledger.refused,
    lost,
    duplicatedKeys,
    duplicateExecutions,
    rerunAfterKill,
    notTerminal,
    deadThoughAcked,
    illegalTransitions: illegal,
    delivered: counts.DELIVERED,
    dead: counts.DEAD,
    rejected: counts.REJECTED,
    redeliveryRate: seenMessages === 0 ? 0 : (ledger.deliveries - seenMessages) / seenMessages,
    examples,
  };
}
