import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '@reach/core';
import type { Envelope, SchemaCodec } from '@reach/envelope';
import type { OutRecord } from '@reach/kafka';
import { DELIVERING_ALONE_AFTER_MS, SentLedger } from '../../../services/dispatcher/dist/sent-ledger.js';
import { buildEntry, entryPartsOf } from '../../../services/dispatcher/dist/entry.js';
import { testEnvelope } from '../../helpers/envelope.js';

// The DELIVERING event of a sent delivery is produced by the instance that sent it, with `at` =
// when it was sent: together with its outcome when that comes from here, else alone once it has
// been unanswered for 250 ms — once per (agent, seq).
const codec = { encode: (_subject: string, v: unknown) => Buffer.from(JSON.stringify(v)), schemaId: () => 1 } as unknown as SchemaCodec;

interface Event {
  state: string;
  message_id: string;
  at: number;
  agent_id: string;
  attempt: number;
  detail_json: string;
}
const eventOf = (r: OutRecord) => JSON.parse((r.value as Buffer).toString()) as Event;
const detailOf = (r: OutRecord) => JSON.parse(eventOf(r).detail_json) as Record<string, unknown>;

const deadline = Date.parse('2026-12-07T12:00:10.000Z');
function entry(seq: number): { entry: string; messageId: string } {
  const envelope = testEnvelope({ capability: 'c' }) as unknown as Envelope;
  const parts = entryPartsOf(
    {
      message_id: envelope.message_id,
      parent_message_id: null,
      agent_id: 'agent.a',
      attempt: 1,
      routed_at: 0,
      deadline_at: deadline,
      budget_deadline_at: null,
      rule: null,
      envelope,
    },
    60,
  );
  return { entry: buildEntry(parts.head, seq, parts.suffix), messageId: envelope.message_id };
}

function ledger(opts: { fail?: boolean } = {}) {
  const sends: OutRecord[][] = [];
  let fail = opts.fail ?? false;
  const l = new SentLedger({
    codec,
    service: 'dispatcher',
    instance: 'd1',
    log: silentLogger,
    outbox: {
      send: async (records: readonly OutRecord[]) => {
        sends.push([...records]);
        if (fail) throw new Error('broker down');
      },
    },
  });
  return { l, sends, heal: () => (fail = false) };
}

const t0 = Date.parse('2026-12-07T12:00:00.000Z');

describe('dispatcher: the ledger of sent deliveries (DELIVERING off the send path)', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(t0);
  });
  afterEach(() => vi.useRealTimers());

  it('hands over the DELIVERING event for the outcome, at the send time, and produces nothing more', async () => {
    const { l, sends } = ledger();
    const a = entry(7);
    l.record('agent.a', 7, a.entry);
    vi.setSystemTime(t0 + 40); // the ack comes 40 ms later
    const taken = l.take('agent.a', 7);
    expect(taken).toHaveLength(1);
    expect(eventOf(taken[0]!)).toMatchObject({ state: 'DELIVERING', message_id: a.messageId, at: t0, agent_id: 'agent.a', attempt: 1 });
    expect(detailOf(taken[0]!)).toEqual({ seq: 7, deadline: new Date(deadline).toISOString(), instance: 'd1' });
    await vi.advanceTimersByTimeAsync(5 * DELIVERING_ALONE_AFTER_MS);
    expect(sends).toEqual([]);
    expect(l.take('agent.a', 7)).toEqual([]);
    expect(l.size).toBe(0);
  });

  it('produces the event alone for a delivery still unanswered after 250 ms, once', async () => {
    const { l, sends } = ledger();
    const a = entry(1);
    l.record('agent.a', 1, a.entry);
    await vi.advanceTimersByTimeAsync(DELIVERING_ALONE_AFTER_MS - 1);
    expect(sends).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(sends).toHaveLength(1);
    expect(sends[0]!.map(eventOf)).toEqual([expect.objectContaining({ state: 'DELIVERING', message_id: a.messageId, at: t0 })]);
    expect(detailOf(sends[0]![0]!)).toMatchObject({ seq: 1, instance: 'd1' });
    // Its outcome then comes without a second DELIVERING, and nothing else is produced.
    expect(l.take('agent.a', 1)).toEqual([]);
    await vi.advanceTimersByTimeAsync(10 * DELIVERING_ALONE_AFTER_MS);
    expect(sends).toHaveLength(1);
  });

  it('runs one timer by the oldest entry: the due ones go out together, the younger ones at their time', async () => {
    const { l, sends } = ledger();
    l.record('agent.a', 1, entry(1).entry);
    l.record('agent.a', 2, entry(2).entry);
    await vi.advanceTimersByTimeAsync(100);
    l.record('agent.b', 1, entry(1).entry);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(DELIVERING_ALONE_AFTER_MS - 100);
    expect(sends.map((s) => s.map((r) => detailOf(r).seq))).toEqual([[1, 2]]);
    expect(sends[0]!.map((r) => eventOf(r).at)).toEqual([t0, t0]);
    await vi.advanceTimersByTimeAsync(99);
    expect(sends).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(sends.map((s) => s.map((r) => eventOf(r).agent_id))).toEqual([['agent.a', 'agent.a'], ['agent.b']]);
    expect(sends[1]!.map((r) => eventOf(r).at)).toEqual([t0 + 100]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('keeps the first send of a delivery sent twice before its event; a send after the event is a new send', async () => {
    const { l, sends } = ledger();
    const a = entry(3);
    l.record('agent.a', 3, a.entry);
    vi.setSystemTime(t0 + 50);
    l.record('agent.a', 3, a.entry); // replayed on a reconnect within the 250 ms
    await vi.advanceTimersByTimeAsync(DELIVERING_ALONE_AFTER_MS);
    expect(sends.flat().map((r) => eventOf(r).at)).toEqual([t0]);
    vi.setSystemTime(t0 + 2_000);
    l.record('agent.a', 3, a.entry); // replayed again later: sent again, a DELIVERING of its own
    const taken = l.take('agent.a', 3);
    expect(taken.map((r) => eventOf(r).at)).toEqual([t0 + 2_000]);
  });

  it('carries a promoted delivery’s lane and wait into its event', () => {
    const { l } = ledger();
    l.note('agent.a', 4, { lane: 'NORMAL', waited_ms: 120 });
    l.record('agent.a', 4, entry(4).entry);
    expect(detailOf(l.take('agent.a', 4)[0]!)).toMatchObject({ seq: 4, lane: 'NORMAL', waited_ms: 120, instance: 'd1' });
  });

  it('produces again what Kafka did not take, and what an outcome handed back', async () => {
    const { l, sends, heal } = ledger({ fail: true });
    l.record('agent.a', 1, entry(1).entry);
    await vi.advanceTimersByTimeAsync(DELIVERING_ALONE_AFTER_MS);
    expect(sends).toHaveLength(1);
    heal();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(sends).toHaveLength(2);
    expect(sends[1]!.map((r) => eventOf(r).at)).toEqual([t0]);

    l.record('agent.a', 2, entry(2).entry);
    const taken = l.take('agent.a', 2);
    l.restore(taken); // the outcome's produce failed
    await vi.advanceTimersByTimeAsync(1_000);
    expect(sends).toHaveLength(3);
    expect(sends[2]).toEqual(taken);
    expect(l.size).toBe(0);
  });

  it('produces everything still waiting at shutdown', async () => {
    const { l, sends } = ledger();
    l.record('agent.a', 1, entry(1).entry);
    l.record('agent.a', 2, entry(2).entry);
    await l.flush();
    expect(sends.map((s) => s.map((r) => detailOf(r).seq))).toEqual([[1, 2]]);
    l.record('agent.a', 3, entry(3).entry);
    expect(l.size).toBe(0);
  });
});
