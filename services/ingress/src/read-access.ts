import type { Principal } from './auth.js';
import type { EventRow, MessageRow } from './read-model.js';

/**
 * Who may read a message, its timeline, its trace and its `?wait_ms` result (issue #13): the
 * admin; its producer; an agent that handled one of its attempts or was its target; and, with
 * REACH_READS_SAME_DOMAIN, every agent of the producer's domain. Everyone else is told the
 * message does not exist (404), so its existence does not leak.
 */
export interface ReadPolicy {
  /** REACH_READS_SAME_DOMAIN. */
  readonly sameDomain: boolean;
}

/** The detail key of the PENDING event ingress writes that names the producer's domain. */
export const PRODUCER_DOMAIN_DETAIL = 'producer_domain';

/** The producer's domain, as ingress recorded it on the message's PENDING event(s). */
export function producerDomainOf(events: readonly EventRow[]): string | undefined {
  for (const e of events) {
    const detail = e.detail as Record<string, unknown> | null;
    const domain = e.state === 'PENDING' && detail !== null && typeof detail === 'object' ? detail[PRODUCER_DOMAIN_DETAIL] : undefined;
    if (typeof domain === 'string') return domain;
  }
  return undefined;
}

/** Is the caller a party of the message by its own row (no timeline needed)? */
export function isPartyByRow(who: Principal, row: MessageRow): boolean {
  return who.admin || row.producer === who.agentId || row.agent_id === who.agentId || row.target_agent_id === who.agentId;
}

/** May `who` read the message `row`, whose timeline is `events`? */
export function mayRead(who: Principal, row: MessageRow, events: readonly EventRow[], policy: ReadPolicy): boolean {
  if (isPartyByRow(who, row)) return true;
  // An earlier attempt may have gone to another agent than the last one (row.agent_id).
  if (events.some((e) => e.agent_id === who.agentId)) return true;
  return policy.sameDomain && who.domain !== undefined && producerDomainOf(events) === who.domain;
}
