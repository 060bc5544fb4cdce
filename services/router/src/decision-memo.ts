import type { RouteDecision, RouteHints, StickyStore } from '@reach/routing';

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

const keyOf = (messageId: string, attempt: number) => `reach:route:${messageId}:${attempt}`;

export class DecisionMemo {
  /** key → agent, in insertion order (a Map iterates oldest first). */
  private readonly local = new Map<string, string>();

  constructor(
    private readonly store: StickyStore,
    private readonly localMax: number = LOCAL_MAX,
  ) {}

  /**
   * The hints for this decision: the remembered agent as its decidedAgent, when there is one.
   * A `fresh` record (written after this router got its partition: no other router can have
   * decided it) is looked up in this process only — the Redis read, one round trip per message,
   * is for records that may have been consumed before.
   */
  async hintsFor(messageId: string, hints: RouteHints, fresh = false): Promise<{ hints: RouteHints; remembered: string | null }> {
    const key = keyOf(messageId, hints.attempt);
    const remembered = this.local.get(key) ?? (fresh ? null : await this.store.get(key).catch(() => null));
    return { hints: remembered ? { ...hints, decidedAgent: remembered } : hints, remembered };
  }

  /** Remembers a first decision (before its routed record is produced). */
  async remember(messageId: string, attempt: number, decision: RouteDecision, remembered: string | null): Promise<void> {
    if (decision.kind !== 'routed') return;
    const key = keyOf(messageId, attempt);
    this.keepLocally(key, decision.agentId);
    if (decision.agentId === remembered) return;
    await this.store.set(key, decision.agentId, KEEP_S).catch(() => undefined);
  }

  private keepLocally(key: string, agent: string): void {
    this.local.delete(key); // a new decision for the key moves it to the newest end
    this.local.set(key, agent);
    if (this.local.size > this.localMax) this.local.delete(this.local.keys().next().value!);
  }
}
