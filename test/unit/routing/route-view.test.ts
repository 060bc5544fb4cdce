import { describe, expect, it } from 'vitest';
import { GrantIndex, domainGate, routesDelta, routesView, type AgentIndex, type RouteViewInput } from '@reach/routing';
import { NOW, agent, cap, indexOf } from './fixtures.js';

// The pre-flight view (R-G6): the router's candidate filter, asked for every name at once.

function view(index: AgentIndex, over: Partial<RouteViewInput> = {}) {
  return routesView({
    index,
    producer: 'caller',
    domain: 'default',
    now: NOW,
    reconnectGraceMs: 0,
    hooks: { domainAllowed: domainGate(index, new GrantIndex()) },
    ...over,
  });
}

describe('routesView', () => {
  it('0 for what a live, connected agent offers, by mode: capabilities and topics apart', () => {
    const index = indexOf(agent('a', { caps: [cap('parse_pdf'), cap('orders', { mode: 'subscribe' })] }));
    expect(view(index)).toEqual({ capabilities: { parse_pdf: 0 }, topics: { orders: 0 } });
  });

  it('2001 when only COOLDOWN, expired or unreachable agents offer it', () => {
    const index = indexOf(agent('cool', { status: 'COOLDOWN' }), agent('old', { leaseExpiresAt: NOW - 1 }));
    index.upsertAgent(agent('gone', { caps: [cap('other_thing')] })); // registered, never connected
    expect(view(index).capabilities).toEqual({ parse_pdf: 2001, other_thing: 2001 });
  });

  it('3001 when every agent that could take it has an open circuit', () => {
    const index = indexOf(agent('a'), agent('b'));
    expect(view(index, { hooks: { circuitOpen: () => true } }).capabilities).toEqual({ parse_pdf: 3001 });
    expect(view(index, { hooks: { circuitOpen: (id) => id === 'a' } }).capabilities).toEqual({ parse_pdf: 0 });
  });

  it('3001, not 2001, when the agent is in COOLDOWN and its circuit is open too (an agent failing its work reports both)', () => {
    const index = indexOf(agent('cool', { status: 'COOLDOWN' }));
    expect(view(index, { hooks: { circuitOpen: () => true } }).capabilities).toEqual({ parse_pdf: 3001 });
    expect(view(index, { hooks: { circuitOpen: () => false } }).capabilities).toEqual({ parse_pdf: 2001 });
    // An expired lease is not named for its circuit: that agent is gone, not failing.
    expect(view(indexOf(agent('old', { leaseExpiresAt: NOW - 1 })), { hooks: { circuitOpen: () => true } }).capabilities).toEqual({ parse_pdf: 2001 });
  });

  it('2003 when every agent is in a domain no grant opens to the producer; a grant makes it 0', () => {
    const finance = agent('ledger', { caps: [cap('read_ledger')] });
    finance.metadata.domain = 'finance';
    const index = indexOf(finance);
    expect(view(index).capabilities).toEqual({ read_ledger: 2003 });
    const grants = GrantIndex.of([{ from_domain: 'default', to_domain: 'finance', capability: 'read_ledger' }]);
    expect(view(index, { hooks: { domainAllowed: domainGate(index, grants) } }).capabilities).toEqual({ read_ledger: 0 });
    expect(view(index, { domain: 'finance' }).capabilities).toEqual({ read_ledger: 0 });
  });

  it('0 while the only agent is reconnecting within the grace (the router holds, it does not refuse)', () => {
    const index = indexOf(agent('a'));
    index.setPresence({ agent_id: 'a', connected: false, dispatcher_instance: 'd', connection_id: 'conn-a', at: NOW - 100 });
    expect(view(index, { reconnectGraceMs: 2_000 }).capabilities).toEqual({ parse_pdf: 0 });
    expect(view(index, { reconnectGraceMs: 0 }).capabilities).toEqual({ parse_pdf: 2001 });
  });
});

describe('routesDelta', () => {
  it('lists changed and new names, removed ones as null, and nothing when nothing changed', () => {
    const before = { capabilities: { a: 0 as const, b: 0 as const }, topics: {} };
    expect(routesDelta(before, before)).toBeNull();
    expect(routesDelta(before, { capabilities: { a: 3001, c: 0 }, topics: { t: 0 } })).toEqual({ capabilities: { a: 3001, c: 0, b: null }, topics: { t: 0 } });
  });
});
