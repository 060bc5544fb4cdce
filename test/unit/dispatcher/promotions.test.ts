import { describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import type { Envelope } from '@reach/envelope';
import { Promoter } from '../../../services/dispatcher/dist/promotions.js';
import { buildEntry, entryPartsOf } from '../../../services/dispatcher/dist/entry.js';
import type { Announcement } from '../../../services/dispatcher/dist/announcer.js';
import { dispatcherMetrics } from '../../../services/dispatcher/dist/metrics.js';
import { ServiceMetrics } from '../../../packages/service-kit/dist/index.js';
import { testEnvelope } from '../../helpers/envelope.js';

// A waiting delivery promoted into a free slot is sent like a fresh one — unless its ack
// deadline (never later than its budget) has already passed while it waited: its agent would
// run a task the deadline sweep is about to end DEAD.

function promotion(seq: number, deadline: number, budgetAt: number | null = null) {
  const envelope = testEnvelope({ capability: 'c', ...(budgetAt === null ? {} : { created_at: budgetAt - 30_000 }) }) as unknown as Envelope;
  const parts = entryPartsOf(
    {
      message_id: envelope.message_id,
      parent_message_id: null,
      agent_id: 'agent.a',
      attempt: 0,
      routed_at: 0,
      deadline_at: deadline,
      budget_deadline_at: budgetAt,
      rule: null,
      envelope,
    },
    60,
  );
  return { agent: 'agent.a', seq, entry: buildEntry(parts.head, seq, parts.suffix), lane: 1 as const, queuedAt: 0, deadline };
}

describe('promoted deliveries', () => {
  it('go out with their lane and wait noted for their DELIVERING event, but not those already past their ack deadline', async () => {
    const noted: Array<[string, number, Record<string, unknown>]> = [];
    const announced: Announcement[][] = [];
    const promoter = new Promoter({
      ledger: { note: (agent, seq, extra) => void noted.push([agent, seq, extra]) },
      metrics: dispatcherMetrics(new ServiceMetrics('dispatcher')),
      log: silentLogger,
      announce: async (items) => void announced.push([...items]),
    });
    const now = 1_800_000_000_000;
    promoter.handle([promotion(1, now - 4_000), promotion(2, now + 5_000), promotion(3, now)], now);
    await Promise.resolve();
    expect(announced.flat().map((a) => a.seq)).toEqual([2]);
    expect(noted).toEqual([['agent.a', 2, { lane: 'NORMAL', waited_ms: now }]]);
    promoter.handle([promotion(4, now - 1)], now);
    expect(announced.flat().map((a) => a.seq)).toEqual([2]);
  });

  it('are not sent with too little of their budget left to be answered in it', async () => {
    const announced: Announcement[][] = [];
    const promoter = new Promoter({
      ledger: { note: () => undefined },
      metrics: dispatcherMetrics(new ServiceMetrics('dispatcher')),
      log: silentLogger,
      announce: async (items) => void announced.push([...items]),
    });
    const now = 1_800_000_000_000;
    // The deadline never outlives the budget: promoted 71 ms before both ends (the long chaos
    // run's "DEAD though acked"), then with 1.5 s and with 20 s left.
    promoter.handle([promotion(1, now + 71, now + 71), promotion(2, now + 1_500, now + 1_500), promotion(3, now + 10_000, now + 20_000)], now);
    await Promise.resolve();
    expect(announced.flat().map((a) => a.seq)).toEqual([2, 3]);
  });
});
