import { describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import type { CircuitCache } from '@reach/circuits';
import { AgentIndex, GrantIndex } from '@reach/routing';
import type { RegistryViews } from '@reach/service-kit';
import { RoutesFeed, type RoutesWatcher } from '../../../services/dispatcher/dist/routes-feed.js';
import { agent, cap, connected } from '../routing/fixtures.js';

// The dispatcher's pre-flight feed (R-G6) pushes a change as soon as a registry feed applies
// it: with the periodic comparison an hour away, every frame below came from a push.

interface Frame {
  full: boolean;
  capabilities: Record<string, number | null>;
  topics: Record<string, number | null>;
}

function harness() {
  const index = new AgentIndex();
  let onChange: () => void = () => undefined;
  let open = new Set<string>();
  const ready = { ready: async () => undefined };
  const views = { index, grants: new GrantIndex(), agents: ready, presence: ready, grantsView: ready, stop: async () => undefined } as unknown as RegistryViews;
  const circuits = {
    start: async () => undefined,
    stop: () => undefined,
    verdict: (id: string) => (open.has(id) ? 'open' : 'closed'),
  } as unknown as CircuitCache;
  const feed = new RoutesFeed({
    startViews: async (changed) => {
      onChange = changed;
      return views;
    },
    circuits,
    reconnectGraceMs: 0,
    refreshMs: 3_600_000,
    pushDelayMs: 1,
    log: silentLogger,
  });
  const frames: Frame[] = [];
  const watcher: RoutesWatcher = {
    agentId: 'caller',
    domain: 'default',
    sendRoutes: (f) => frames.push(JSON.parse(f) as Frame) > 0,
  };
  /** What a feed does: apply, then tell. */
  const feedApplies = (apply: () => void) => {
    apply();
    onChange();
  };
  return {
    feed,
    watcher,
    frames,
    feedApplies,
    index,
    /** What the circuit map does on a transition: the dispatcher wires it to changed(). */
    openCircuit: (id: string) => {
      open = new Set([...open, id]);
      feed.changed();
    },
  };
}

const live = (id: string, name: string) => agent(id, { caps: [cap(name)], leaseExpiresAt: Date.now() + 60_000 });

async function next(frames: Frame[], count: number): Promise<Frame> {
  while (frames.length < count) await new Promise((r) => setTimeout(r, 5));
  return frames[count - 1]!;
}

describe('RoutesFeed (subscribe_routes → routes)', () => {
  it('sends the full view, then pushes each change of the feeds and of the circuits as it happens', async () => {
    const h = harness();
    h.index.upsertAgent(live('a1', 'parse_pdf'));
    h.index.setPresence(connected('a1', Date.now()));
    await h.feed.subscribe(h.watcher);
    expect(h.frames).toEqual([{ type: 'routes', full: true, capabilities: { parse_pdf: 0 }, topics: {} }]);

    // A new agent registers (not connected yet: 2001), then connects (0).
    h.feedApplies(() => h.index.upsertAgent(live('a2', 'read_ledger')));
    expect(await next(h.frames, 2)).toMatchObject({ full: false, capabilities: { read_ledger: 2001 } });
    h.feedApplies(() => h.index.setPresence(connected('a2', Date.now())));
    expect(await next(h.frames, 3)).toMatchObject({ full: false, capabilities: { read_ledger: 0 } });

    h.openCircuit('a1');
    expect(await next(h.frames, 4)).toMatchObject({ full: false, capabilities: { parse_pdf: 3001 } });

    h.feedApplies(() => h.index.removeAgent('a2'));
    expect(await next(h.frames, 5)).toEqual({ type: 'routes', full: false, capabilities: { read_ledger: null }, topics: {} });
    await h.feed.stop();
  });

  it('sends nothing for a change that changes nothing for the watcher, and one frame for a burst', async () => {
    const h = harness();
    await h.feed.subscribe(h.watcher);
    h.feedApplies(() => h.index.upsertAgent(live('b1', 'one_thing')));
    h.feedApplies(() => h.index.upsertAgent(live('b2', 'other_thing')));
    expect(await next(h.frames, 2)).toMatchObject({ full: false, capabilities: { one_thing: 2001, other_thing: 2001 } });
    // A heartbeat-like update of the same record: the verdicts stay, so no frame; the next real change is frame 3.
    h.feedApplies(() => h.index.upsertAgent({ ...live('b1', 'one_thing'), revision: 2 }));
    await new Promise((r) => setTimeout(r, 20)); // its push has run (a slower one would only merge with the next)
    h.feedApplies(() => h.index.setPresence(connected('b1', Date.now())));
    expect(await next(h.frames, 3)).toMatchObject({ full: false, capabilities: { one_thing: 0 } });
    expect(h.frames).toHaveLength(3);
    await h.feed.stop();
  });
});
