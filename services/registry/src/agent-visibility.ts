import { capabilityMatches } from '@reach/agents';
import type { AgentRecord } from '@reach/envelope';
import type { DomainGrant } from './grants.js';

/**
 * Who may see which agents in `GET /v1/agents` and `GET /v1/agents/{id}` (issue #13, least
 * privilege): the admin sees every agent; an agent sees the agents of its own domain whole,
 * and of another domain only the capabilities its domain was granted there (an agent with none
 * of them is not listed at all, and `GET /v1/agents/{id}` answers 404 as for an unknown id, so
 * an agent's existence does not leak across domains).
 */
export type Viewer = { readonly admin: true } | { readonly admin: false; readonly domain: string; readonly grants: readonly DomainGrant[] };

/** `record` as `viewer` may see it (capabilities trimmed to the granted ones), or undefined. */
export function visibleAgent(record: AgentRecord, viewer: Viewer): AgentRecord | undefined {
  if (viewer.admin) return record;
  const { domain } = record.metadata;
  if (domain === viewer.domain) return record;
  const grants = viewer.grants.filter((g) => g.from_domain === viewer.domain && g.to_domain === domain);
  if (grants.some((g) => g.capability === null)) return record;
  const capabilities = record.capabilities.filter((cap) => grants.some((g) => g.capability !== null && capabilityMatches(g.capability, cap)));
  return capabilities.length === 0 ? undefined : { ...record, capabilities };
}
