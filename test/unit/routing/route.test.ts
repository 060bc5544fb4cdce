import { describe, expect, it } from 'vitest';
import {
  FANOUT_AGENT,
  FANOUT_PARENT,
  MAX_TRACE_CANDIDATES,
  MemoryStickyStore,
  readHints,
  rendezvousPick,
  routeMessage,
  stickyKey,
  type StickyStore,
} from '@reach/routing';
import type { Envelope } from '@reach/envelope';
import { agent, cap, chosen, connected, deps, DownStickyStore, envelope, hints, indexOf, NOW, seeded } from './fixtures.js';

describe('routeMessage: capability messages', () => {
  it('sends a message to exactly one agent: the lowest load rate wins when all else is equal', async () => {
    const index = indexOf(agent('busy', { currentLoad: 6 }), agent('idle', { currentLoad: 1 }), agent('mid', { currentLoad: 3 }));
    const d = await routeMessage(envelope(), hints(), deps(index), NOW);
    expect(chosen(d)).toBe('idle');
    expect(d.kind === 'routed' && d.trace).toMatchObject({ strategy: 'weighted', chosen: 'idle', candidates_total: 3 });
  });

  it('records the routing trace: candidates with their score terms, best first (R-B12)', async () => {
    const index = indexOf(agent('a', { currentLoad: 5, health: 0.9 }), agent('b', { currentLoad: 1 }));
    const d = await routeMessage(envelope(), hints(), deps(index), NOW);
    if (d.kind !== 'routed') throw new Error(d.kind);
    expect(d.trace.candidates).toEqual([
      { agent_id: 'b', score: expect.any(Number), load_rate: 0.1, health: 1, priority: 1, locality: 0 },
      { agent_id: 'a', score: expect.any(Number), load_rate: 0.5, health: 0.9, priority: 1, locality: 0 },
    ]);
    expect(d.trace.candidates[0]!.score).toBeGreaterThan(d.trace.candidates[1]!.score);
    expect(JSON.parse(JSON.stringify(d.trace))).toEqual(d.trace);
  });

  it('bounds the trace to the best candidates and says how many there were', async () => {
    const agents = Array.from({ length: 30 }, (_, i) => agent(`a${String(i).padStart(2, '0')}`, { currentLoad: i % 8 }));
    const d = await routeMessage(envelope(), hints(), deps(indexOf(...agents)), NOW);
    if (d.kind !== 'routed') throw new Error(d.kind);
    expect(d.trace.candidates).toHaveLength(MAX_TRACE_CANDIDATES);
    expect(d.trace.candidates_total).toBe(30);
    expect(d.candidates).toBe(30);
  });

  it('with the jitter, equal agents share the work', async () => {
    const index = indexOf(agent('a'), agent('b'), agent('c'));
    const d = deps(index, { config: { jitter: 0.05 }, rng: seeded(7) });
    const counts = new Map<string, number>();
    for (let i = 0; i < 3000; i++) {
      const id = chosen(await routeMessage(envelope(), hints(), d, NOW));
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    for (const id of ['a', 'b', 'c']) expect(counts.get(id)).toBeGreaterThan(800);
  });

  it('above 20 candidates picks at random among the best 5 (R-B4)', async () => {
    // 25 agents with clearly separated load rates: a00 best … a24 worst.
    const agents = Array.from({ length: 25 }, (_, i) => agent(`a${String(i).padStart(2, '0')}`, { maxConcurrency: 100, currentLoad: i * 3 }));
    const d = deps(indexOf(...agents), { rng: seeded(42) });
    const counts = new Map<string, number>();
    const N = 5000;
    for (let i = 0; i < N; i++) {
      const decision = await routeMessage(envelope(), hints(), d, NOW);
      if (decision.kind !== 'routed') throw new Error(decision.kind);
      expect(decision.trace.strategy).toBe('top_k_random');
      counts.set(decision.agentId, (counts.get(decision.agentId) ?? 0) + 1);
    }
    expect([...counts.keys()].sort()).toEqual(['a00', 'a01', 'a02', 'a03', 'a04']);
    for (const n of counts.values()) {
      expect(n / N).toBeGreaterThan(0.17);
      expect(n / N).toBeLessThan(0.23);
    }
  });

  it('at exactly 20 candidates still takes the best one', async () => {
    const agents = Array.from({ length: 20 }, (_, i) => agent(`a${String(i).padStart(2, '0')}`, { maxConcurrency: 100, currentLoad: i * 3 }));
    const d = deps(indexOf(...agents), { rng: seeded(3) });
    for (let i = 0; i < 50; i++) expect(chosen(await routeMessage(envelope(), hints(), d, NOW))).toBe('a00');
  });

  it('honours reach-preferred-agent when that agent is a candidate (R-B5)', async () => {
    const index = indexOf(agent('best'), agent('pref', { currentLoad: 5 }), agent('asleep', { status: 'COOLDOWN' }));
    const d = await routeMessage(envelope(), hints({ preferredAgent: 'pref' }), deps(index), NOW);
    expect(chosen(d)).toBe('pref');
    expect(d.kind === 'routed' && d.trace).toMatchObject({ strategy: 'preferred', preferred: { agent_id: 'pref', honoured: true } });

    const notCandidate = await routeMessage(envelope(), hints({ preferredAgent: 'asleep' }), deps(index), NOW);
    expect(chosen(notCandidate)).toBe('best');
    expect(notCandidate.kind === 'routed' && notCandidate.trace.preferred).toEqual({ agent_id: 'asleep', honoured: false });

    const unknown = await routeMessage(envelope(), hints({ preferredAgent: 'nobody' }), deps(index), NOW);
    expect(chosen(unknown)).toBe('best');
  });

  it('reads the preferred agent, tags and QUEUE_REQUEST from the envelope headers and attempt/exclusions from the record', () => {
    const env = envelope({ headers: { 'reach-preferred-agent': ' pref ', 'reach-capability-tags': 'risk, eu', 'reach-on-saturation': 'QUEUE_REQUEST' } });
    expect(readHints({ 'reach-attempt': '2', 'reach-exclude-agents': 'a,b' }, env)).toEqual({
      attempt: 2,
      excludeAgents: ['a', 'b'],
      preferredAgent: 'pref',
      rejectOnSaturation: true,
      capabilityTags: ['risk', 'eu'],
    });
    expect(readHints({ 'reach-attempt': 'x' }, envelope())).toEqual(hints());
  });

  it('routes only to agents carrying the wanted tags', async () => {
    const index = indexOf(agent('plain'), agent('risky', { currentLoad: 7, caps: [cap('parse_pdf', { tags: ['risk'] })] }));
    expect(chosen(await routeMessage(envelope(), hints({ capabilityTags: ['risk'] }), deps(index), NOW))).toBe('risky');
  });

  it('fails over to another candidate than the excluded one, or the same when it is the only one', async () => {
    const index = indexOf(agent('a'), agent('b', { currentLoad: 5 }));
    expect(chosen(await routeMessage(envelope(), hints({ excludeAgents: ['a'] }), deps(index), NOW))).toBe('b');
    const alone = indexOf(agent('a'));
    const d = await routeMessage(envelope(), hints({ excludeAgents: ['a'] }), deps(alone), NOW);
    expect(chosen(d)).toBe('a');
    expect(d.kind === 'routed' && d.trace.exclusion_relaxed).toBe(true);
  });
});

describe('routeMessage: session stickiness (R-B6)', () => {
  const session = (s: string): Envelope => envelope({ session_id: s });

  it('keeps a session on the same agent while it stays a candidate, even when another scores better', async () => {
    const store = new MemoryStickyStore();
    const index = indexOf(agent('a', { currentLoad: 1 }), agent('b', { currentLoad: 2 }));
    const d = deps(index, { sticky: store });
    expect(chosen(await routeMessage(session('s1'), hints(), d, NOW))).toBe('a');
    expect(store.bindings.get(stickyKey('parse_pdf', 's1'))).toEqual({ agentId: 'a', ttlS: 1800 });

    // a becomes busier than b: without stickiness b would win.
    index.upsertAgent(agent('a', { revision: 2, currentLoad: 7 }));
    const again = await routeMessage(session('s1'), hints(), d, NOW);
    expect(chosen(again)).toBe('a');
    expect(again.kind === 'routed' && again.trace).toMatchObject({ strategy: 'sticky', sticky: { session_id: 's1', source: 'store', bound: 'a', kept: true } });
    // Another session is scored normally.
    expect(chosen(await routeMessage(session('s2'), hints(), d, NOW))).toBe('b');
  });

  it('re-binds the session when its agent is no longer a candidate', async () => {
    const store = new MemoryStickyStore();
    const index = indexOf(agent('a'), agent('b', { currentLoad: 3 }));
    const d = deps(index, { sticky: store });
    expect(chosen(await routeMessage(session('s1'), hints(), d, NOW))).toBe('a');
    index.upsertAgent(agent('a', { revision: 2, status: 'OFFLINE' }));
    expect(chosen(await routeMessage(session('s1'), hints(), d, NOW))).toBe('b');
    expect(store.bindings.get(stickyKey('parse_pdf', 's1'))?.agentId).toBe('b');
    // a comes back: the session stays with b.
    index.upsertAgent(agent('a', { revision: 3 }));
    expect(chosen(await routeMessage(session('s1'), hints(), d, NOW))).toBe('b');
  });

  it('keeps bindings per capability', async () => {
    const store = new MemoryStickyStore();
    const index = indexOf(agent('a', { caps: [cap('x'), cap('y')] }));
    await routeMessage(envelope({ capability: 'x', session_id: 's' }), hints(), deps(index, { sticky: store }), NOW);
    await routeMessage(envelope({ capability: 'y', session_id: 's' }), hints(), deps(index, { sticky: store }), NOW);
    expect([...store.bindings.keys()].sort()).toEqual(['reach:sticky:x:s', 'reach:sticky:y:s']);
  });

  it('when the sticky store is down, hashes the session over the candidates: deterministic, routing goes on', async () => {
    const down = new DownStickyStore();
    const agents = ['a', 'b', 'c', 'd'].map((id, i) => agent(id, { currentLoad: i }));
    const index = indexOf(...agents);
    const first = await routeMessage(session('s-42'), hints(), deps(index, { sticky: down, config: { jitter: 0.05 }, rng: seeded(1) }), NOW);
    expect(first.kind).toBe('routed');
    expect(first.kind === 'routed' && first.trace).toMatchObject({ strategy: 'sticky_hash', sticky: { source: 'hash' } });
    // Same session → same agent, whatever the jitter and the order the agents are listed in.
    const reversed = indexOf(...[...agents].reverse());
    for (let seed = 2; seed < 20; seed++) {
      expect(chosen(await routeMessage(session('s-42'), hints(), deps(reversed, { sticky: down, config: { jitter: 0.05 }, rng: seeded(seed) }), NOW))).toBe(
        chosen(first),
      );
    }
    expect(chosen(first)).toBe(rendezvousPick('s-42', ['a', 'b', 'c', 'd']));
    // Sessions spread over the candidates instead of piling onto one.
    const spread = new Set<string>();
    for (let i = 0; i < 200; i++) spread.add(chosen(await routeMessage(session(`s${i}`), hints(), deps(index, { sticky: down }), NOW)));
    expect(spread.size).toBe(4);
  });

  it('rendezvous hashing moves only the sessions of an agent that leaves', () => {
    const before = new Map<string, string>();
    for (let i = 0; i < 500; i++) before.set(`s${i}`, rendezvousPick(`s${i}`, ['a', 'b', 'c', 'd'])!);
    for (const [s, was] of before) {
      const now = rendezvousPick(s, ['a', 'b', 'd']);
      if (was !== 'c') expect(now).toBe(was);
    }
    expect(rendezvousPick('s', [])).toBeUndefined();
  });

  it('a failing bind does not stop the message', async () => {
    const flaky: StickyStore = { get: () => Promise.resolve(null), set: () => Promise.reject(new Error('timeout')) };
    expect(chosen(await routeMessage(session('s'), hints(), deps(indexOf(agent('a')), { sticky: flaky }), NOW))).toBe('a');
  });

  it('does not touch the sticky store for messages without a session', async () => {
    const down = new DownStickyStore();
    expect(chosen(await routeMessage(envelope(), hints(), deps(indexOf(agent('a')), { sticky: down }), NOW))).toBe('a');
    expect(down.calls).toBe(0);
  });

  it('the preferred agent wins over the session binding, and the session follows it', async () => {
    const store = new MemoryStickyStore();
    const index = indexOf(agent('a'), agent('b', { currentLoad: 4 }));
    const d = deps(index, { sticky: store });
    expect(chosen(await routeMessage(session('s'), hints(), d, NOW))).toBe('a');
    expect(chosen(await routeMessage(session('s'), hints({ preferredAgent: 'b' }), d, NOW))).toBe('b');
    expect(chosen(await routeMessage(session('s'), hints(), d, NOW))).toBe('b');
  });
});

describe('routeMessage: saturation (R-B7)', () => {
  it('holds the message when EVERY candidate is above the threshold', async () => {
    const index = indexOf(agent('a', { currentLoad: 9 }), agent('b', { maxConcurrency: 100, currentLoad: 81 }));
    const d = await routeMessage(envelope(), hints(), deps(index), NOW);
    expect(d.kind).toBe('saturated');
    if (d.kind !== 'saturated') return;
    expect(d.trace.saturation).toBe(0.8);
    expect(d.trace.candidates.every((c) => c.saturated === true)).toBe(true);
    expect(d.candidates).toBe(2);
  });

  it('lets a HIGH message through when every candidate is saturated: it waits in the agent lane, not behind the flood', async () => {
    const index = indexOf(agent('a', { currentLoad: 9 }), agent('b', { currentLoad: 10 }));
    const d = await routeMessage(envelope({ priority: 'HIGH' }), hints(), deps(index), NOW);
    expect(d.kind === 'routed' && d.agentId).toBe('a');
    expect(d.kind === 'routed' && d.trace.saturation).toBe(0.8);
    // NORMAL and LOW are held as before, and a HIGH sender asking for QUEUE_REQUEST still gets 2002.
    expect((await routeMessage(envelope({ priority: 'NORMAL' }), hints(), deps(index), NOW)).kind).toBe('saturated');
    expect((await routeMessage(envelope({ priority: 'HIGH' }), hints({ rejectOnSaturation: true }), deps(index), NOW)).kind).toBe('saturated');
  });

  it('routes to an agent exactly at the threshold, and never to a saturated one while another has room', async () => {
    const index = indexOf(agent('at', { currentLoad: 8 }));
    expect(chosen(await routeMessage(envelope(), hints(), deps(index), NOW))).toBe('at');
    // The saturated agent has the best weight and health, but it takes no new work.
    const mixed = indexOf(agent('hot', { currentLoad: 9, weight: 5 }), agent('room', { currentLoad: 7, health: 0.2 }));
    for (let i = 0; i < 20; i++)
      expect(chosen(await routeMessage(envelope(), hints(), deps(mixed, { config: { jitter: 0.05 }, rng: seeded(i) }), NOW))).toBe('room');
  });

  it('does not let the preferred or sticky agent overload itself', async () => {
    const store = new MemoryStickyStore();
    const index = indexOf(agent('a'), agent('b', { currentLoad: 3 }));
    const d = deps(index, { sticky: store });
    expect(chosen(await routeMessage(envelope({ session_id: 's' }), hints(), d, NOW))).toBe('a');
    index.upsertAgent(agent('a', { revision: 2, currentLoad: 10 }));
    expect(chosen(await routeMessage(envelope({ session_id: 's' }), hints({ preferredAgent: 'a' }), d, NOW))).toBe('b');
  });

  it('sends a repeat of a decision (decidedAgent) to the same agent even when it is saturated, and routes afresh when that agent went OFFLINE', async () => {
    // A broker restart leaves every agent busy; a record consumed again must not go elsewhere.
    const index = indexOf(agent('first', { currentLoad: 10 }), agent('room', { currentLoad: 1 }), agent('gone', { status: 'OFFLINE' }));
    const d = await routeMessage(envelope(), hints({ decidedAgent: 'first' }), deps(index), NOW);
    expect(chosen(d)).toBe('first');
    expect(d.kind === 'routed' && d.trace.strategy).toBe('repeat');
    // every candidate saturated: the repeat still goes, where a fresh message is held
    const busy = indexOf(agent('first', { currentLoad: 10 }), agent('other', { currentLoad: 10 }));
    expect(chosen(await routeMessage(envelope(), hints({ decidedAgent: 'first' }), deps(busy), NOW))).toBe('first');
    expect((await routeMessage(envelope(), hints(), deps(busy), NOW)).kind).toBe('saturated');
    // the first agent went OFFLINE: routed afresh
    expect(chosen(await routeMessage(envelope(), hints({ decidedAgent: 'gone' }), deps(index), NOW))).toBe('room');
  });

  it('uses the configured threshold', async () => {
    const index = indexOf(agent('a', { currentLoad: 6 }));
    expect((await routeMessage(envelope(), hints(), deps(index, { config: { saturation: 0.5 } }), NOW)).kind).toBe('saturated');
    expect((await routeMessage(envelope(), hints(), deps(index, { config: { saturation: 0.6 } }), NOW)).kind).toBe('routed');
  });
});

describe('routeMessage: no route, expiry, targets, fan-out (R-B8, R-B10)', () => {
  it('finds no route when nothing offers the exact capability', async () => {
    const index = indexOf(agent('items', { caps: [cap('query:order_items')] }), agent('sub', { caps: [cap('query:orders', { mode: 'subscribe' })] }));
    const d = await routeMessage(envelope({ capability: 'query:orders' }), hints(), deps(index), NOW);
    expect(d).toMatchObject({ kind: 'no_route', candidates: 0, trace: { address: 'query:orders', considered: 1, rejected: { mode: 1 } } });
  });

  it('declares a message whose expire_at has passed expired, before anything else', async () => {
    const d = await routeMessage(envelope({ expire_at: NOW }), hints(), deps(indexOf(agent('a'))), NOW);
    expect(d.kind).toBe('expired');
    expect((await routeMessage(envelope({ expire_at: NOW + 1 }), hints(), deps(indexOf(agent('a'))), NOW)).kind).toBe('routed');
  });

  it('sends target_agent_id messages to that agent when registered and reachable', async () => {
    const index = indexOf(agent('t', { caps: [], status: 'COOLDOWN' }), agent('off', { status: 'OFFLINE' }), agent('expired', { leaseExpiresAt: NOW - 1 }));
    index.upsertAgent(agent('unreachable'));
    const to = (id: string) => routeMessage(envelope({ capability: null, target_agent_id: id }), hints(), deps(index), NOW);
    const d = await to('t');
    expect(chosen(d)).toBe('t');
    expect(d.kind === 'routed' && d.trace).toMatchObject({ strategy: 'target', chosen: 't' });
    for (const id of ['off', 'expired', 'unreachable', 'nobody']) expect((await to(id)).kind).toBe('no_route');
    expect(await to('nobody')).toMatchObject({ why: 'agent nobody is not registered' });
  });

  it('says until when a message waits for its only agent to reconnect, for a capability and a target', async () => {
    const index = indexOf(agent('a'), agent('other', { caps: [cap('other')] }));
    index.setPresence({ ...connected('a'), connected: false, at: NOW - 500 });
    const graced = deps(index, { config: { reconnectGraceMs: 2_000 } });
    const byCap = await routeMessage(envelope(), hints(), graced, NOW);
    expect(byCap).toMatchObject({ kind: 'no_route', reconnectingUntil: NOW + 1_500, trace: { rejected: { reconnecting: 1 } } });
    const byTarget = await routeMessage(envelope({ capability: null, target_agent_id: 'a' }), hints(), graced, NOW);
    expect(byTarget).toMatchObject({ kind: 'no_route', why: 'agent a is reconnecting', reconnectingUntil: NOW + 1_500 });
    // Past the grace (or with none) it is an ordinary no route.
    const late = await routeMessage(envelope(), hints(), graced, NOW + 1_500);
    expect(late.kind === 'no_route' && late.reconnectingUntil).toBeUndefined();
    expect(await routeMessage(envelope({ capability: null, target_agent_id: 'a' }), hints(), deps(index), NOW)).not.toHaveProperty('reconnectingUntil');
  });

  it('fans a topic out to every live subscriber', async () => {
    const index = indexOf(
      agent('s1', { caps: [cap('news.tech', { mode: 'subscribe' })] }),
      agent('s2', { caps: [cap('news.tech', { mode: 'subscribe' })], currentLoad: 10 }),
      agent('s3', { caps: [cap('news.tech', { mode: 'subscribe' }), cap('parse_pdf')] }),
      agent('handler', { caps: [cap('news.tech')] }),
      agent('other', { caps: [cap('news.sport', { mode: 'subscribe' })] }),
      agent('gone', { caps: [cap('news.tech', { mode: 'subscribe' })], status: 'OFFLINE' }),
    );
    const d = await routeMessage(envelope({ capability: null, topic: 'news.tech' }), hints(), deps(index), NOW);
    expect(d.kind).toBe('fanout');
    if (d.kind !== 'fanout') return;
    // Saturation does not apply: every subscriber gets its copy.
    expect(d.agentIds).toEqual(['s1', 's2', 's3']);
    expect(d.trace).toMatchObject({ strategy: 'broadcast', candidates_total: 3, chosen: null });
  });

  it('finds no route for a topic without subscribers', async () => {
    const d = await routeMessage(envelope({ capability: null, topic: 'nobody.listens' }), hints(), deps(indexOf(agent('a'))), NOW);
    expect(d).toMatchObject({ kind: 'no_route', trace: { strategy: 'broadcast', address: 'nobody.listens' } });
  });

  it('routes a retried fan-out copy back to its own subscriber only', async () => {
    const index = indexOf(agent('s1', { caps: [cap('t', { mode: 'subscribe' })] }), agent('s2', { caps: [cap('t', { mode: 'subscribe' })] }));
    const copy = envelope({ capability: null, topic: 't', headers: { [FANOUT_PARENT]: 'msg_parent', [FANOUT_AGENT]: 's2' } });
    const d = await routeMessage(copy, hints({ attempt: 1 }), deps(index), NOW);
    expect(d).toMatchObject({ kind: 'routed', agentId: 's2', parentMessageId: 'msg_parent', trace: { strategy: 'fanout_copy' } });
  });
});
