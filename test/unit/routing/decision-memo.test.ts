import { describe, expect, it } from 'vitest';
import type { RouteDecision, RouteHints } from '@reach/routing';
import { DecisionMemo, memoField, memoKey, type MemoStore } from '../../../services/router/dist/decision-memo.js';

// A router that consumes a pending record again (killed before its commit) must send it where
// it went the first time: found by pnpm chaos, where re-routing by score sent 7 of 1,613
// messages to a second agent after a router kill -9.
class MapStore implements MemoStore {
  /** `<hash key> <field>` → agent */
  readonly kv = new Map<string, string>();
  down = false;
  reads = 0;
  writes = 0;
  async read(key: string, field: string): Promise<string | null> {
    this.reads++;
    if (this.down) throw new Error('redis down');
    return this.kv.get(`${key} ${field}`) ?? null;
  }
  async write(hashes: ReadonlyArray<{ key: string; fields: Record<string, string> }>): Promise<void> {
    this.writes++;
    if (this.down) throw new Error('redis down');
    for (const h of hashes) for (const [f, v] of Object.entries(h.fields)) this.kv.set(`${h.key} ${f}`, v);
  }
}

/** The pending record's timestamp: every call about one record gives the same. */
const AT = Date.parse('2026-12-07T18:00:30Z');
const stored = (messageId: string, attempt = 0) => `${memoKey(AT)} ${memoField(messageId, attempt)}`;

const hints: RouteHints = { attempt: 0, excludeAgents: [], preferredAgent: undefined, rejectOnSaturation: false, capabilityTags: [] };
const routed = (agentId: string) => ({ kind: 'routed', agentId }) as unknown as RouteDecision;

describe('router decision memo', () => {
  it('prefers the agent a first decision chose when the same attempt is routed again', async () => {
    const store = new MapStore();
    const memo = new DecisionMemo(store);
    const first = await memo.hintsFor('msg_1', hints, false, AT);
    expect(first).toEqual({ hints, remembered: null });
    await memo.remember('msg_1', 0, routed('agent-a'), first.remembered, AT);
    const again = await memo.hintsFor('msg_1', hints, false, AT);
    expect(again.remembered).toBe('agent-a');
    expect(again.hints.decidedAgent).toBe('agent-a');
    // another attempt (a retry) decides afresh
    expect((await memo.hintsFor('msg_1', { ...hints, attempt: 1 }, false, AT)).remembered).toBeNull();
  });

  it('remembers a new agent when the remembered one could not be chosen, and nothing for other outcomes', async () => {
    const store = new MapStore();
    const memo = new DecisionMemo(store);
    await memo.remember('msg_2', 0, routed('agent-a'), null, AT);
    await memo.remember('msg_2', 0, routed('agent-b'), 'agent-a', AT);
    expect((await memo.hintsFor('msg_2', hints, false, AT)).remembered).toBe('agent-b');
    await memo.remember('msg_3', 0, { kind: 'no_route' } as unknown as RouteDecision, null, AT);
    expect(store.kv.has(stored('msg_3'))).toBe(false);
  });

  it('routes on without it while Redis is away', async () => {
    const store = new MapStore();
    store.down = true;
    const memo = new DecisionMemo(store);
    expect(await memo.hintsFor('msg_4', hints, false, AT)).toEqual({ hints, remembered: null });
    await expect(memo.remember('msg_4', 0, routed('agent-a'), null, AT)).resolves.toBeUndefined();
  });

  it('a repeat in the same process goes to the first agent although Redis is away or lost the memo', async () => {
    const store = new MapStore();
    const memo = new DecisionMemo(store);
    await memo.remember('msg_5', 0, routed('agent-a'), null, AT);
    store.down = true; // kill -9 of Redis while the batch is retried
    expect((await memo.hintsFor('msg_5', hints, false, AT)).hints.decidedAgent).toBe('agent-a');
    store.down = false;
    store.kv.clear(); // back, without its last writes
    expect((await memo.hintsFor('msg_5', hints, false, AT)).remembered).toBe('agent-a');
  });

  it('keeps at most its bound of decisions in the process, the oldest going first', async () => {
    const store = new MapStore();
    store.down = true;
    const memo = new DecisionMemo(store, 2);
    for (const id of ['m1', 'm2', 'm3']) await memo.remember(id, 0, routed(`agent-${id}`), null, AT);
    expect((await memo.hintsFor('m1', hints, false, AT)).remembered).toBeNull();
    expect((await memo.hintsFor('m2', hints, false, AT)).remembered).toBe('agent-m2');
    expect((await memo.hintsFor('m3', hints, false, AT)).remembered).toBe('agent-m3');
  });

  it('reads Redis only for a record another router may have decided: a fresh one is looked up in the process alone', async () => {
    const store = new MapStore();
    const memo = new DecisionMemo(store);
    store.kv.set(stored('msg_6'), 'agent-elsewhere');
    // fresh: written after this router got the partition, so nobody else decided it
    expect(await memo.hintsFor('msg_6', hints, true, AT)).toEqual({ hints, remembered: null });
    expect(store.reads).toBe(0);
    // not fresh (consumed again after a rebalance or a crash): the memo in Redis decides
    expect((await memo.hintsFor('msg_6', hints, false, AT)).remembered).toBe('agent-elsewhere');
    expect(store.reads).toBe(1);
    // a fresh repeat in this process (a retried batch) still finds its own decision
    await memo.remember('msg_7', 0, routed('agent-a'), null, AT);
    expect((await memo.hintsFor('msg_7', hints, true, AT)).remembered).toBe('agent-a');
    expect(store.reads).toBe(1);
  });

  it("writes the decisions of one macrotask together, in the hash of their records' minute, kept two minutes past it", async () => {
    const store = new MapStore();
    const memo = new DecisionMemo(store);
    await Promise.all(['a', 'b', 'c'].map((id) => memo.remember(id, 0, routed(`agent-${id}`), null, AT)));
    expect(store.writes).toBe(1);
    expect(store.kv.get(stored('b'))).toBe('agent-b');
    // the same record consumed again in another process reads the same hash
    expect((await new DecisionMemo(store).hintsFor('c', hints, false, AT)).remembered).toBe('agent-c');
    // a record of the next minute is in the next hash
    expect(memoKey(AT + 60_000)).not.toBe(memoKey(AT));
  });
});
