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
 * Kept as long as a repeat can come (uncommitted offsets, a rebalance); with Redis away the
 * router decides without it (SPEC R-D12: routing continues), so a repeat may then pick anew.
 */
const KEEP_S = 120;

const keyOf = (messageId: string, attempt: number) => `reach:route:${messageId}:${attempt}`;

export class DecisionMemo {
  constructor(private readonly store: StickyStore) {}

  /** The hints for this decision: the remembered agent as its decidedAgent, when there is one. */
  async hintsFor(messageId: string, hints: RouteHints): Promise<{ hints: RouteHints; remembered: string | null }> {
    const remembered = await this.store.get(keyOf(messageId, hints.attempt)).catch(() => null);
    return { hints: remembered ? { ...hints, decidedAgent: remembered } : hints, remembered };
  }

  /** Remembers a first decision (before its routed record is produced). */
  async remember(messageId: string, attempt: number, decision: RouteDecision, remembered: string | null): Promise<void> {
    if (decision.kind !== 'routed' || decision.agentId === remembered) return;
    await this.store.set(keyOf(messageId, attempt), decision.agentId, KEEP_S).catch(() => undefined);
  }
}
