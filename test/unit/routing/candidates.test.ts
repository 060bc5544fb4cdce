import { describe, expect, it } from 'vitest';
import { AgentIndex, filterCandidates, parseAddress, type FilterInput } from '@reach/routing';
import { agent, cap, connected, envelope, indexOf, NOW } from './fixtures.js';

const input = (o: Partial<FilterInput> = {}): FilterInput => ({
  address: parseAddress('parse_pdf'),
  mode: 'handle',
  requiredTags: [],
  exclude: [],
  envelope: envelope(),
  now: NOW,
  ...o,
});

const ids = (r: { candidates: Array<{ agent_id: string }> }) => r.candidates.map((a) => a.agent_id).sort();

describe('candidate filter (R-B2)', () => {
  it('keeps only ONLINE agents: COOLDOWN and OFFLINE take no new work', () => {
    const index = indexOf(agent('on'), agent('cool', { status: 'COOLDOWN' }), agent('off', { status: 'OFFLINE' }));
    const r = filterCandidates(index, input());
    expect(ids(r)).toEqual(['on']);
    expect(r.considered).toBe(3);
    expect(r.rejected).toEqual({ status: 2 });
  });

  it('names the circuit for an agent in COOLDOWN whose circuit is open (3001 for its senders), the status otherwise', () => {
    const index = indexOf(agent('cool', { status: 'COOLDOWN' }), agent('off', { status: 'OFFLINE' }));
    const r = filterCandidates(index, input({ hooks: { circuitOpen: () => true } }));
    expect(ids(r)).toEqual([]);
    expect(r.rejected).toEqual({ circuit: 1, status: 1 });
  });

  it('drops agents whose lease has expired', () => {
    const index = indexOf(agent('live'), agent('stale', { leaseExpiresAt: NOW - 1 }), agent('edge', { leaseExpiresAt: NOW }));
    const r = filterCandidates(index, input());
    expect(ids(r)).toEqual(['live']);
    expect(r.rejected).toEqual({ lease: 2 });
  });

  it('needs the agent reachable: connected per presence, or an HTTP endpoint', () => {
    const index = new AgentIndex();
    index.upsertAgent(agent('ws'));
    index.setPresence(connected('ws'));
    index.upsertAgent(agent('gone'));
    index.setPresence({ ...connected('gone'), connected: false });
    index.upsertAgent(agent('never'));
    index.upsertAgent(agent('http', { http: 'http://127.0.0.1:9/agent' }));
    const r = filterCandidates(index, input());
    expect(ids(r)).toEqual(['http', 'ws']);
    expect(r.rejected).toEqual({ unreachable: 2 });
  });

  it('counts an agent whose socket died within the reconnect grace as reconnecting, and says until when', () => {
    const index = new AgentIndex();
    index.upsertAgent(agent('blip'));
    index.setPresence({ ...connected('blip'), connected: false, at: NOW - 500 });
    index.upsertAgent(agent('long-gone'));
    index.setPresence({ ...connected('long-gone'), connected: false, at: NOW - 5_000 });
    const r = filterCandidates(index, input({ reconnectGraceMs: 2_000 }));
    expect(ids(r)).toEqual([]);
    expect(r.rejected).toEqual({ reconnecting: 1, unreachable: 1 });
    expect(r.reconnectingUntil).toBe(NOW + 1_500);
    // Without a grace nobody is expected back.
    const none = filterCandidates(index, input());
    expect(none.rejected).toEqual({ unreachable: 2 });
    expect(none.reconnectingUntil).toBeNull();
  });

  it('takes handle-mode capabilities for capability messages and subscribe-mode for topics', () => {
    const index = indexOf(agent('h', { caps: [cap('news')] }), agent('s', { caps: [cap('news', { mode: 'subscribe' })] }));
    expect(ids(filterCandidates(index, input({ address: parseAddress('news') })))).toEqual(['h']);
    expect(ids(filterCandidates(index, input({ address: parseAddress('news'), mode: 'subscribe' })))).toEqual(['s']);
  });

  it('never matches a similar name (R-B1)', () => {
    const index = indexOf(agent('items', { caps: [cap('query:order_items')] }), agent('orders', { caps: [cap('query:orders')] }));
    expect(ids(filterCandidates(index, input({ address: parseAddress('query:orders') })))).toEqual(['orders']);
    expect(ids(filterCandidates(index, input({ address: parseAddress('query:order') })))).toEqual([]);
  });

  it('applies the tag filter to the matching capability', () => {
    const index = indexOf(
      agent('risk', { caps: [cap('score', { tags: ['risk', 'eu'] })] }),
      agent('plain', { caps: [cap('score')] }),
      // The tag sits on another capability of the agent: it does not count.
      agent('elsewhere', { caps: [cap('score'), cap('other', { tags: ['risk'] })] }),
    );
    const r = filterCandidates(index, input({ address: parseAddress('score'), requiredTags: ['risk'] }));
    expect(ids(r)).toEqual(['risk']);
    expect(r.rejected).toEqual({ tags: 2 });
    expect(ids(filterCandidates(index, input({ address: parseAddress('score'), requiredTags: ['risk', 'us'] })))).toEqual([]);
  });

  it('avoids excluded agents, and relaxes the exclusion when nobody else is left (R-B9)', () => {
    const index = indexOf(agent('a'), agent('b'));
    const r = filterCandidates(index, input({ exclude: ['a'] }));
    expect(ids(r)).toEqual(['b']);
    expect(r.exclusionRelaxed).toBe(false);
    const all = filterCandidates(index, input({ exclude: ['a', 'b'] }));
    expect(ids(all)).toEqual(['a', 'b']);
    expect(all.exclusionRelaxed).toBe(true);
    // An excluded agent that fails another check is not brought back.
    const one = indexOf(agent('a'), agent('b', { status: 'OFFLINE' }));
    expect(ids(filterCandidates(one, input({ exclude: ['a'] })))).toEqual(['a']);
  });

  it('consults the circuit and domain hooks, which allow everything by default', () => {
    const index = indexOf(agent('a'), agent('b'), agent('c'));
    expect(ids(filterCandidates(index, input()))).toEqual(['a', 'b', 'c']);
    const r = filterCandidates(
      index,
      input({ hooks: { circuitOpen: (id) => id === 'a', domainAllowed: (env, ag) => env.producer === 'agent.producer' && ag.agent_id !== 'b' } }),
    );
    expect(ids(r)).toEqual(['c']);
    expect(r.rejected).toEqual({ circuit: 1, domain: 1 });
  });
});
