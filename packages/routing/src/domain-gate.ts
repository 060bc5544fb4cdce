import { PRODUCER_DOMAIN_HEADER } from '@reach/core';
import type { AgentRecord, Envelope } from '@reach/envelope';
import type { AgentIndex } from './agent-index.js';
import type { FilterHooks } from './candidates.js';
import { majorOf, parseAddress } from './capability.js';
import type { GrantIndex } from './domains.js';

const domainOf = (agent: AgentRecord | undefined): string | undefined => agent?.metadata.domain ?? undefined;

/**
 * The security-domain check of the candidate filter (R-A8). The producer's domain is the
 * one ingress read from its verified token, else its registry record, else "default". Same
 * domain passes; otherwise a grant producer-domain → agent-domain for the capability (or the
 * topic; an agent-addressed message needs an all-capabilities grant). A correlated reply
 * (task_result to an agent) may go back along any granted direction, so a granted request
 * never strands its answer.
 */
export function domainGate(index: AgentIndex, grants: GrantIndex): NonNullable<FilterHooks['domainAllowed']> {
  return (envelope: Envelope, agent: AgentRecord): boolean => {
    const from = envelope.headers[PRODUCER_DOMAIN_HEADER] || domainOf(index.agent(envelope.producer)) || 'default';
    const to = domainOf(agent) || 'default';
    if (grants.allows(from, to, askedCapability(envelope, agent))) return true;
    return envelope.message_type === 'task_result' && envelope.target_agent_id !== null && grants.hasAny(to, from);
  };
}

/**
 * The capability a grant must cover: `name@major` as precisely as it is known — pinned by the
 * sender, else the major of the candidate's own capability — so a grant for `@2` never opens an
 * unpinned request to a major-3 agent. A topic is asked about by name; an agent-addressed
 * message (null) needs an all-capabilities grant.
 */
function askedCapability(envelope: Envelope, agent: AgentRecord): string | null {
  const raw = envelope.capability ?? envelope.topic;
  if (raw === null) return null;
  const address = parseAddress(raw);
  const major = address.major ?? majorOf(agent.capabilities.find((c) => c.name === address.name)?.version);
  return major === undefined ? address.name : `${address.name}@${major}`;
}
