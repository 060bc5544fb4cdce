import { describe, expect, it } from 'vitest';
import { FANOUT_AGENT, FANOUT_PARENT, MemoryStickyStore, routeMessage, ruleFactsOf, stickyValue, type RouteHints, type RoutePolicy } from '@reach/routing';
import { agent, cap, deps, envelope, indexOf, NOW, seeded } from './fixtures.js';

const hints: RouteHints = { attempt: 0, excludeAgents: [], preferredAgent: undefined, rejectOnSaturation: false, capabilityTags: [] };
const policy = (o: Partial<RoutePolicy>): RoutePolicy => ({ rule: 'r1', dispatch: 'weighted', stickyBy: null, ...o });

describe('routing policy from a ReachRule (R-B11)', () => {
  it('dispatch random spreads over every available candidate, not just the best', async () => {
    const index = indexOf(agent('a', { currentLoad: 0 }), agent('b', { currentLoad: 5 }), agent('c', { currentLoad: 7 }));
    const rng = seeded(7);
    const seen = new Map<string, number>();
    for (let i = 0; i < 300; i++) {
      const d = await routeMessage(envelope(), hints, { ...deps(index), rng }, NOW, policy({ dispatch: 'random' }));
      if (d.kind !== 'routed') throw new Error(d.kind);
      expect(d.trace).toMatchObject({ strategy: 'random', rule: 'r1' });
      seen.set(d.agentId, (seen.get(d.agentId) ?? 0) + 1);
    }
    // Each of three candidates gets roughly a third (binomial, n=300: far outside ±5 sigma otherwise).
    for (const id of ['a', 'b', 'c']) expect(seen.get(id)).toBeGreaterThan(60);
    // Weighted dispatch of the same messages always picks the least loaded.
    const w = await routeMessage(envelope(), hints, deps(index), NOW, policy({ dispatch: 'weighted' }));
    expect(w.kind === 'routed' && w.agentId).toBe('a');
  });

  it('dispatch sticky binds by the sticky_by field, and a message without it is not sticky', async () => {
    const index = indexOf(agent('a'), agent('b'), agent('c'));
    const sticky = new MemoryStickyStore();
    const p = policy({ dispatch: 'sticky', stickyBy: 'correlation_id' });
    const first = await routeMessage(envelope({ correlation_id: 'conv-9' }), hints, deps(index, { sticky }), NOW, p);
    if (first.kind !== 'routed') throw new Error(first.kind);
    expect(first.trace.sticky).toMatchObject({ session_id: 'conv-9', sticky_by: 'correlation_id', source: 'store' });
    expect([...sticky.bindings.keys()]).toEqual(['reach:sticky:parse_pdf:correlation_id=conv-9']);
    // Even when another agent becomes the best by score, the binding holds.
    const index2 = indexOf(
      agent('a', { currentLoad: first.agentId === 'a' ? 5 : 0 }),
      agent('b', { currentLoad: first.agentId === 'b' ? 5 : 0 }),
      agent('c', { currentLoad: first.agentId === 'c' ? 5 : 0 }),
    );
    const again = await routeMessage(envelope({ correlation_id: 'conv-9' }), hints, deps(index2, { sticky }), NOW, p);
    expect(again.kind === 'routed' && again.agentId).toBe(first.agentId);
    const none = await routeMessage(envelope({ correlation_id: null }), hints, deps(index, { sticky }), NOW, p);
    expect(none.kind === 'routed' && none.trace.sticky).toBeUndefined();
    expect(stickyValue(envelope({ headers: { sequence_id: 's1' } }), 'headers.sequence_id')).toBe('s1');
  });

  it('a rule with dispatch weighted or random ignores the session; the default keeps session stickiness', async () => {
    const index = indexOf(agent('a'), agent('b'));
    const sticky = new MemoryStickyStore();
    await routeMessage(envelope({ session_id: 's1' }), hints, deps(index, { sticky }), NOW, policy({ dispatch: 'weighted' }));
    expect(sticky.bindings.size).toBe(0);
    await routeMessage(envelope({ session_id: 's1' }), hints, deps(index, { sticky }), NOW);
    expect(sticky.bindings.size).toBe(1);
  });

  it('a dry run (bindSticky false) reads bindings but never writes them', async () => {
    const index = indexOf(agent('a'), agent('b'));
    const sticky = new MemoryStickyStore();
    const d = await routeMessage(envelope({ session_id: 's1' }), hints, { ...deps(index, { sticky }), bindSticky: false }, NOW);
    expect(d.kind).toBe('routed');
    expect(sticky.bindings.size).toBe(0);
  });

  it('dispatch broadcast sends a capability message to every available handler, each as a tracked copy', async () => {
    const index = indexOf(agent('a'), agent('b'), agent('off', { status: 'OFFLINE' }));
    const d = await routeMessage(envelope(), hints, deps(index), NOW, policy({ dispatch: 'broadcast' }));
    if (d.kind !== 'fanout') throw new Error(d.kind);
    expect(d.agentIds).toEqual(['a', 'b']);
    expect(d.trace).toMatchObject({ strategy: 'broadcast', rule: 'r1' });
    // A retried copy goes back to its own agent, not to a new broadcast.
    const copy = envelope({ headers: { [FANOUT_PARENT]: 'msg_parent', [FANOUT_AGENT]: 'b' } });
    const r = await routeMessage(copy, hints, deps(index), NOW, policy({ dispatch: 'broadcast' }));
    expect(r.kind === 'routed' && r.agentId).toBe('b');
  });

  it('no route under a rule still names the rule in the trace', async () => {
    const d = await routeMessage(envelope({ capability: 'nobody_has_this' }), hints, deps(indexOf(agent('a'))), NOW, policy({ rule: 'strict' }));
    expect(d.kind === 'no_route' && d.trace.rule).toBe('strict');
  });

  it('the domain hook also guards messages addressed to one agent', async () => {
    const index = indexOf(agent('a'));
    const d = await routeMessage(envelope({ capability: null, target_agent_id: 'a' }), hints, { ...deps(index), hooks: { domainAllowed: () => false } }, NOW);
    expect(d.kind).toBe('no_route');
    expect(d.kind === 'no_route' && d.trace.rejected).toEqual({ domain: 1 });
  });

  it('rule facts: target role is the capability name without its major, source roles are the producer type and capabilities', () => {
    const producer = agent('p', { caps: [cap('retriever'), cap('ranker', { mode: 'subscribe' })] });
    expect(ruleFactsOf(envelope({ capability: 'retriever@2', tags: ['x'] }), producer)).toEqual({
      message_type: 'task_request',
      target_role: 'retriever',
      source_roles: ['test', 'retriever', 'ranker'],
      tags: ['x'],
    });
    expect(ruleFactsOf(envelope({ capability: null, topic: 'news' }), undefined)).toMatchObject({ target_role: 'news', source_roles: [] });
  });
});
