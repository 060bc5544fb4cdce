import { describe, expect, it } from 'vitest';
import { PRODUCER_DOMAIN_HEADER } from '@reach/core';
import { AgentIndex, GrantIndex, domainGate } from '@reach/routing';
import { agent, cap, envelope } from './fixtures.js';

const inDomain = (id: string, domain: string, version: string | null = null) => {
  const a = agent(id, { caps: [cap('parse_pdf', { version })] });
  return { ...a, metadata: { ...a.metadata, domain } };
};
const from = (domain: string, o: Parameters<typeof envelope>[0] = {}) => envelope({ ...o, headers: { [PRODUCER_DOMAIN_HEADER]: domain } });

describe("the router's domain gate (R-A8)", () => {
  it('passes the same domain and refuses another without a grant', () => {
    const gate = domainGate(new AgentIndex(), new GrantIndex());
    expect(gate(from('sales'), inDomain('a', 'sales'))).toBe(true);
    expect(gate(from('sales'), inDomain('a', 'ops'))).toBe(false);
  });

  it("asks about the candidate's own major: a grant for @2 does not open an unpinned request to a major-3 agent", () => {
    const gate = domainGate(new AgentIndex(), GrantIndex.of([{ from_domain: 'sales', to_domain: 'ops', capability: 'parse_pdf@2' }]));
    expect(gate(from('sales'), inDomain('v2', 'ops', '2.1.0'))).toBe(true);
    expect(gate(from('sales'), inDomain('v3', 'ops', '3.0.0'))).toBe(false);
    expect(gate(from('sales', { capability: 'parse_pdf@3' }), inDomain('v3', 'ops', '3.0.0'))).toBe(false);
  });

  it("falls back to the producer's registry record, then to the default domain, when ingress stamped nothing", () => {
    const index = new AgentIndex();
    index.upsertAgent(inDomain('agent.producer', 'sales'));
    const gate = domainGate(index, GrantIndex.of([{ from_domain: 'sales', to_domain: 'ops', capability: null }]));
    expect(gate(envelope(), inDomain('a', 'ops'))).toBe(true);
    expect(gate(envelope({ producer: 'unknown' }), inDomain('a', 'default'))).toBe(true);
    expect(gate(envelope({ producer: 'unknown' }), inDomain('a', 'ops'))).toBe(false);
  });

  it('lets a correlated reply travel back along any granted direction, but nothing else', () => {
    const gate = domainGate(new AgentIndex(), GrantIndex.of([{ from_domain: 'front', to_domain: 'back', capability: 'parse_pdf' }]));
    const reply = from('back', { message_type: 'task_result', capability: null, target_agent_id: 'requester' });
    expect(gate(reply, inDomain('requester', 'front'))).toBe(true);
    expect(gate({ ...reply, message_type: 'event' }, inDomain('requester', 'front'))).toBe(false);
  });
});
