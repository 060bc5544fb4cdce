import { BatchedCall } from '@reach/kafka';
import type { RouteDecision, RouteHints } from '@reach/routing';

/**
 * One routing decision per (message, attempt), even when the router decides twice. A router
 * killed (or rebalanced) before it committed its offsets consumes those pending records again;
 * routed anew by load and score, a record could go to another agent than the first time, and
 * that agent would run a task the first one already ran (found by `pnpm chaos`: 7 of 1,613 keys
 * ran twice after a router kill -9). So the chosen agent is remembered in Redis before the
 * routed record is produced, and a repeat goes to it (even saturated: a broker restart leaves
 * every agent busy, and a repeat that went elsewhere ran twice — `pnpm chaos --faults
 * kill-kafka`): the same agent again, whose dispatcher recognises the delivery and does not
 * store it twice.
 *
 * Kept as long as a repeat can come (uncommitted offsets, a rebalance). The process also keeps
 * its own recent decisions: a batch kafkajs retries in this process (its produce or commit
 * failed, e.g. while Redis was being killed and restarted) finds its decisions here even when
 * Redis cannot answer or lost its last writes. Only a repeat in another process with Redis away
 * is decided anew (R-D12: routing continues).
 */
const KEEP_S = 120;
/** Decisions kept in the process: about two minutes at 500 msg/s; the oldest go first. */
const LOCAL_MAX = 60_000;
/**
 * Decisions are stored in one hash per minute of their pending records' timestamps (Kafka's,
 * the same each time a record is consumed again), a field per (message, attempt): the
 * decisions of one macrotask go in one HSET and one EXPIREAT per minute, not one SET with its
 * TTL per message (issue 27: one Redis command and one awaited round trip per message). A hash
 * lives until KEEP_S after its minute ends.
 */
const BUCKET_MS = 60_000;

export const memoKey = (recordTimestampMs: number) => `reach:route:${Math.floor(recordTimestampMs / BUCKET_MS)}`;
export const memoField = (messageId: string, attempt: number) => `${messageId}:${attempt}`;
const expiresAtS = (recordTimestampMs: number) => (Math.floor(recordTimestampMs / BUCKET_MS) + 1) * (BUCKET_MS / 1000) + KEEP_S;

/** Where decisions are kept: hashes with an expiry. Throws when it cannot answer. */
export interface MemoStore {
  read(key: string, field: string): Promise<string | null>;
  /** Sets the fields of each hash and its expiry (epoch s). */
  write(hashes: ReadonlyArray<{ key: string; fields: Record<string, string>; expireAtS: number }>): Promise<void>;
}

interface Decided {
  key: string;
  field: string;
  agent: string;
  expireAtS: number;
}

export class DecisionMemo {
  /** key → agent, in insertion order (a Map iterates oldest first). */
  private readonly local = new Map<string, string>();
  /** The decisions of one macrotask, written together. */
  private readonly writes = new BatchedCall<Decided, void>(async (items) => {
    const hashes = new Map<string, { key: string; fields: Record<string, string>; expireAtS: number }>();
    for (const d of items) {
      const h = hashes.get(d.key) ?? { key: d.key, fields: {}, expireAtS: d.expireAtS };
      h.fields[d.field] = d.agent;
      hashes.set(d.key, h);
    }
    await this.store.write([...hashes.values()]);
    return items.map(() => undefined);
  });

  constructor(
    private readonly store: MemoStore,
    private readonly localMax: number = LOCAL_MAX,
  ) {}

  /**
   * The hints for this decision: the remembered agent as its decidedAgent, when there is one.
   * A `fresh` record (written after this router got its partition: no other router can have
   * decided it) is looked up in this process only — the Redis read, one round trip per message,
   * is for records that may have been consumed before. `recordTimestampMs`: the pending
   * record's Kafka timestamp.
   */
  async hintsFor(messageId: string, hints: RouteHints, fresh: boolean, recordTimestampMs: number): Promise<{ hints: RouteHints; remembered: string | null }> {
    const field = memoField(messageId, hints.attempt);
    const remembered = this.local.get(field) ?? (fresh ? null : await this.store.read(memoKey(recordTimestampMs), field).catch(() => null));
    return { hints: remembered ? { ...hints, decidedAgent: remembered } : hints, remembered };
  }

  /** Remembers a first decision (before its routed record is produced). */
  async remember(messageId: string, attempt: number, decision: RouteDecision, remembered: string | null, recordTimestampMs: number): Promise<void> {
    if (decision.kind !== 'routed') return;
    const field = memoField(messageId, attempt);
    this.keepLocally(field, decision.agentId);
    if (decision.agentId === remembered) return;
    await this.writes.add({ key: memoKey(recordTimestampMs), field, agent: decision.agentId, expireAtS: expiresAtS(recordTimestampMs) }).catch(() => undefined);
  }

  private keepLocally(key: string, agent: string): void {
    this.local.delete(key); // a new decision for the key moves it to the newest end
    this.local.set(key, agent);
    if (this.local.size > this.localMax) this.local.delete(this.local.keys().next().value!);
  }
}
