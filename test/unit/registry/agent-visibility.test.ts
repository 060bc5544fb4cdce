import { describe, expect, it } from 'vitest';
import type { AgentRecord } from '@reach/envelope';
import { visibleAgent, type Viewer } from '../../../services/registry/src/agent-visibility.js';

// Issue #13: who sees which agent in the registry's listings.
function agentIn(domain: string): AgentRecord {
  const cap = (name: string, version: string | null = null) => ({
    name,
    version,
    mode: 'handle' as const,
    tags: [],
    consumption: 'single' as const,
    scope_json: null,
    constraints_json: null,
  });
  return {
    agent_id: `a.${domain}`,
    agent_type: 'a',
    status: 'ONLINE',
    revision: 1,
    lease_id: 'lease_1',
    lease_expires_at: 0,
    ttl_s: 20,
    endpoints: { ws: null, http: null, protocol_version: '1' },
    capabilities: [cap('parse_pdf'), cap('summarize', '2.1'), cap('summarize@3')],
    metadata: { max_concurrency: 4, region: null, timezone: null, model: null, domain, weight: 1, extra: {} },
    load: { current_load: 0, queue_length: 0, avg_latency_ms: 0, health: 1 },
    qos: 1,
    registered_at: 0,
    updated_at: 0,
  };
}

const names = (r: AgentRecord | undefined) => r?.capabilities.map((c) => c.name);
const viewer = (grants: Array<{ to_domain: string; capability: string | null; from_domain?: string }>): Viewer => ({
  admin: false,
  domain: 'home',
  grants: grants.map((g) => ({ from_domain: 'home', ...g })),
});

describe('visibleAgent', () => {
  it('shows the admin every agent whole', () => {
    expect(visibleAgent(agentIn('away'), { admin: true })).toEqual(agentIn('away'));
  });

  it("shows an agent its own domain's agents whole, whatever the grants", () => {
    expect(visibleAgent(agentIn('home'), viewer([]))).toEqual(agentIn('home'));
  });

  it('hides an agent of another domain without a grant', () => {
    expect(visibleAgent(agentIn('away'), viewer([]))).toBeUndefined();
    // a grant in the other direction, or to a third domain, opens nothing
    expect(visibleAgent(agentIn('away'), viewer([{ from_domain: 'away', to_domain: 'home', capability: null }]))).toBeUndefined();
    expect(visibleAgent(agentIn('away'), viewer([{ to_domain: 'third', capability: null }]))).toBeUndefined();
  });

  it('shows only the granted capabilities of another domain, with @major pins', () => {
    expect(names(visibleAgent(agentIn('away'), viewer([{ to_domain: 'away', capability: 'parse_pdf' }])))).toEqual(['parse_pdf']);
    expect(names(visibleAgent(agentIn('away'), viewer([{ to_domain: 'away', capability: 'summarize@2' }])))).toEqual(['summarize']);
    expect(names(visibleAgent(agentIn('away'), viewer([{ to_domain: 'away', capability: 'summarize' }])))).toEqual(['summarize', 'summarize@3']);
    expect(visibleAgent(agentIn('away'), viewer([{ to_domain: 'away', capability: 'summarize@9' }]))).toBeUndefined();
  });

  it('shows the whole agent for an all-capabilities grant', () => {
    expect(visibleAgent(agentIn('away'), viewer([{ to_domain: 'away', capability: null }]))).toEqual(agentIn('away'));
  });
});
