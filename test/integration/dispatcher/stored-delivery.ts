import type { Envelope, RoutedDelivery } from '@reach/envelope';
import { testEnvelope } from '../../helpers/envelope.js';
import { entryPartsOf } from '../../../services/dispatcher/dist/entry.js';
import type { ReplayBuffer } from '../../../services/dispatcher/dist/replay-buffer.js';

export interface StoredDelivery {
  messageId: string;
  seq: number;
  appendedAt: number;
}

/**
 * Stores a delivery for agent `id` in its replay buffer the way the dispatcher's routed consumer
 * does — with the dispatcher's own append script — and sends nothing: the test plays a consumer
 * that died between its append and its announcement.
 * Its budget ends `budgetLeftMs` from now, its ack deadline `deadlineInMs` from now.
 */
export async function storeDelivery(
  buffer: ReplayBuffer,
  id: string,
  capability: string,
  opts: { budgetLeftMs?: number; deadlineInMs?: number } = {},
): Promise<StoredDelivery> {
  const now = Date.now();
  const envelope = testEnvelope({ capability, producer: id }) as unknown as Envelope;
  const routed: RoutedDelivery = {
    message_id: envelope.message_id,
    parent_message_id: null,
    agent_id: id,
    attempt: 0,
    routed_at: now,
    deadline_at: now + (opts.deadlineInMs ?? 30_000),
    budget_deadline_at: now + (opts.budgetLeftMs ?? 60_000),
    rule: null,
    envelope,
  };
  const parts = entryPartsOf(routed, 300, now);
  const { results } = await buffer.appendMany(
    [
      {
        agent: id,
        messageId: routed.message_id,
        head: parts.head,
        attempt: 0,
        messagePart: parts.messagePart,
        deadline: routed.deadline_at,
        windowMs: 30_000,
        budgetAt: routed.budget_deadline_at,
        lane: 1,
        waitDeadline: routed.budget_deadline_at!,
      },
    ],
    now,
  );
  const stored = results[0]!;
  if (stored.kind !== 'inflight') throw new Error(`not stored in flight: ${stored.kind}`);
  return { messageId: routed.message_id, seq: stored.seq, appendedAt: now };
}
