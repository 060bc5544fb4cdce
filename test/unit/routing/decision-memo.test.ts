import { describe, expect, it } from 'vitest';
import type { RouteDecision, RouteHints, StickyStore } from '@reach/routing';
import { DecisionMemo } from '../../../services/router/dist/decision-memo.js';

// A router that consumes a pending record again (killed before its commit) must send it where
// it went the first time: found by pnpm chaos, where re-routing by score sent 7 of 1,613
// messages to a second agent after a router kill -9.
class MapStore implements StickyStore {
  readonly kv = new Map<string, string>();
  down = false;
  reads = 0;
  async get(key: string): Promise<string | null> {
    this.reads++;
    if (this.down) throw new Error('redis down');
    return this.kv.get(key) ?? null;
  }
  async set(key: string, agentId: string): Promise<void> {
    if (this.down) throw new Error('redis down');
    this.kv.set(key, agentId);
  }
}

const hints: RouteHints = { attempt: 0, excludeAgents: [], preferredAgent: undefined, rejectOnSaturation: false, capabilityTags: [] };
const routed = (agentId: string) => ({ kind: 'routed', agentId }) as unknown as RouteDecision;

describe('router decision memo', () => {
  it('prefers the agent a first decision chose when the same attempt is routed again', async () => {
    const store = new MapStore();
    const memo = new DecisionMemo(store);
    const first = await memo.hintsFor('msg_1', hints);
    expect(first).toEqual({ hints, remembered: null });
    await memo.remember('msg_1', 0, routed('agent-a'), first.remembered);
    const again = await memo.hintsFor('msg_1', hints);
    expect(again.remembered).toBe('agent-a');
    expect(again.hints.decidedAgent).toBe('agent-a');
    // another attempt (a retry) decides afresh
    expect((await memo.hintsFor('msg_1', { ...hints, attempt: 1 })).remembered).toBeNull();
  });

  it('remembers a new agent when the remembered one could not be chosen, and nothing for other outcomes', async () => {
    const store = new MapStore();
    const memo = new DecisionMemo(store);
    await memo.remember('msg_2', 0, routed('agent-a'), null);
    await memo.remember('msg_2', 0, routed('agent-b'), 'agent-a');
    expect((await memo.hintsFor('msg_2', hints)).remembered).toBe('agent-b');
    await memo.remember('msg_3', 0, { kind: 'no_route' } as unknown as RouteDecision, null);
    expect(store.kv.has('reach:route:msg_3:0')).toBe(false);
  });

  it('routes on without it while Redis is away', async () => {
    const store = new MapStore();
    store.down = true;
    const memo = new DecisionMemo(store);
    expect(await memo.hintsFor('msg_4', hints)).toEqual({ hints, remembered: null });
    await expect(memo.remember('msg_4', 0, routed('agent-a'), null)).resolves.toBeUndefined();
  });

  it('a repeat in the same process goes to the first agent although Redis is away or lost the memo', async () => {
    const store = new MapStore();
    const memo = new DecisionMemo(store);
    await memo.remember('msg_5', 0, routed('agent-a'), null);
    store.down = true; // kill -9 of Redis while the batch is retried
    expect((await memo.hintsFor('msg_5', hints)).hints.decidedAgent).toBe('agent-a');
    store.down = false;
    store.kv.clear(); // back, without its last writes
    expect((await memo.hintsFor('msg_5', hints)).remembered).toBe('agent-a');
  });

  it('keeps at most its bound of decisions in the process, the oldest going first', async () => {
    const store = new MapStore();
    store.down = true;
    const memo = new DecisionMemo(store, 2);
    for (const id of ['m1', 'm2', 'm3']) await memo.remember(id, 0, routed(`agent-${id}`), null);
    expect((await memo.hintsFor('m1', hints)).remembered).toBeNull();
    expect((await memo.hintsFor('m2', hints)).remembered).toBe('agent-m2');
    expect((await memo.hintsFor('m3', hints)).remembered).toBe('agent-m3');
  });

  it('reads Redis only for a record another router may have decided: a fresh one is looked up in the process alone', async () => {
    const store = new MapStore();
    const memo = new DecisionMemo(store);
    store.kv.set('reach:route:msg_6:0', 'agent-elsewhere');
    // fresh: written after this router got the partition, so nobody else decided it
    expect(await memo.hintsFor('msg_6', hints, true)).toEqual({ hints, remembered: null });
    expect(store.reads).toBe(0);
    // not fresh (consumed again after a rebalance or a crash): the memo in Redis decides
    expect((await memo.hintsFor('msg_6', hints, false)).remembered).toBe('agent-elsewhere');
    expect(store.reads).toBe(1);
    // a fresh repeat in this process (a retried batch) still finds its own decision
    await memo.remember('msg_7', 0, routed('agent-a'), null);
    expect((await memo.hintsFor('msg_7', hints, true)).remembered).toBe('agent-a');
    expect(store.reads).toBe(1);
  });
});
