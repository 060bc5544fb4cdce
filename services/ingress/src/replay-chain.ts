import { BUDGET_FROM_HEADER, ReachError } from '@reach/core';
import type { Envelope } from '@reach/envelope';
import { ACK_JOURNAL, ENDED_MESSAGES, type Redis } from '@reach/store';

/**
 * A dead-letter replay (the admin token with a `reach-attempt` header) starts a new delivery
 * attempt chain of the same message (docs/pipeline.md, "Replays"): its budget counts from when
 * ingress accepts it (BUDGET_FROM_HEADER), not from created_at, which stays the message's for
 * its identity and timeline. Anyone else's BUDGET_FROM_HEADER is dropped: no producer can
 * stretch its own budget.
 */
export function withBudgetFrom(envelope: Envelope, replayAt: number | undefined): Envelope {
  if (replayAt === undefined) {
    if (!(BUDGET_FROM_HEADER in envelope.headers)) return envelope;
    const headers = { ...envelope.headers };
    delete headers[BUDGET_FROM_HEADER];
    return { ...envelope, headers };
  }
  return { ...envelope, headers: { ...envelope.headers, [BUDGET_FROM_HEADER]: String(replayAt) } };
}

/**
 * Forgets what the stuck sweep and the ack journal remember of a message's earlier chain: the
 * sweep's DEAD mark (with it, the dispatcher refused every answer of the replay, which then
 * never ended: issue #25) and a late-settled ack (with it, the sweep took the replay for acked
 * and never declared it DEAD). Called before the replay is handed to the pipeline.
 */
export class ReplayChains {
  constructor(private readonly redis: Pick<Redis, 'multi'>) {}

  async start(messageId: string): Promise<void> {
    try {
      const res = await this.redis.multi().zrem(ENDED_MESSAGES, messageId).zrem(ACK_JOURNAL.ackedLate, messageId).exec();
      const failed = res?.find(([err]) => err !== null);
      if (failed) throw failed[0];
    } catch (err) {
      throw new ReachError('DEPENDENCY_UNAVAILABLE', `could not clear the earlier chain of replayed message ${messageId}: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }
}
