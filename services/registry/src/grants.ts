import { DOMAIN_PATTERN } from '@reach/core';
import { invalidRegistration, parseCapabilityName } from '@reach/agents';

/** What a grant allows: from_domain → to_domain, for one capability or (null) all of them. */
export interface DomainGrant {
  readonly from_domain: string;
  readonly to_domain: string;
  readonly capability: string | null;
}

/**
 * A cross-domain grant as stored (PostgreSQL `grants`) and published (reach.v1.Grant). Its
 * grant_id, `from|to|capability` (`*` for every capability), is derived by PostgreSQL
 * (migration 007) and equals grantId() of @reach/routing.
 */
export interface StoredGrant extends DomainGrant {
  readonly grant_id: string;
  readonly created_by: string | null;
  /** epoch ms */
  readonly created_at: number;
}

const FIELDS = new Set(['from_domain', 'to_domain', 'capability']);

function domainField(body: Record<string, unknown>, field: 'from_domain' | 'to_domain'): string {
  const v = body[field];
  if (typeof v !== 'string' || !DOMAIN_PATTERN.test(v)) throw invalidRegistration(field, 'must be a domain: 1–64 letters, digits, ".", "_" or "-"');
  return v;
}

/**
 * The body of PUT /v1/grants: `{from_domain, to_domain, capability?}`. `capability` is
 * `name@major` (that major), `name` (every major) or absent/null (every capability); its
 * grammar is the capability grammar, so `|` and `*` never occur and the grant id stays
 * unambiguous. Unknown fields are refused (a typo such as `capabilities` would otherwise
 * silently grant everything).
 */
export function parseGrantBody(body: unknown): DomainGrant {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw invalidRegistration('body', 'must be a JSON object {from_domain, to_domain, capability?}');
  const b = body as Record<string, unknown>;
  for (const k of Object.keys(b)) if (!FIELDS.has(k)) throw invalidRegistration(k, 'unknown field (from_domain, to_domain, capability)');
  const from_domain = domainField(b, 'from_domain');
  const to_domain = domainField(b, 'to_domain');
  if (from_domain === to_domain) throw invalidRegistration('to_domain', 'must differ from from_domain: delivery inside a domain needs no grant');
  let capability: string | null = null;
  if (b.capability !== undefined && b.capability !== null) {
    const parsed = typeof b.capability === 'string' ? parseCapabilityName(b.capability) : undefined;
    if (!parsed) throw invalidRegistration('capability', 'must be a capability name, name@major, or null for every capability');
    capability = parsed.major === undefined ? parsed.base : `${parsed.base}@${parsed.major}`;
  }
  return { from_domain, to_domain, capability };
}

/** The JSON form of a grant in the API (RFC 3339 times, docs/design.md §3). */
export function grantToJson(g: StoredGrant): Record<string, unknown> {
  return {
    grant_id: g.grant_id,
    from_domain: g.from_domain,
    to_domain: g.to_domain,
    capability: g.capability,
    created_by: g.created_by,
    created_at: new Date(g.created_at).toISOString(),
  };
}
