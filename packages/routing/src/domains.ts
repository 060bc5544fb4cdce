import { parseAddress } from './capability.js';

/**
 * Security domains (R-A8): every agent lives in one domain (descriptor
 * `metadata.domain`, default "default"). Delivery inside a domain is always allowed; delivery
 * from one domain to another needs a grant `from_domain → to_domain`, for every capability
 * (`capability: null`) or for one capability.
 *
 * Capability semantics of a grant (the registry validates the grammar when it stores one):
 * - `null`: every capability and topic of `to_domain`, and messages addressed to an agent id.
 * - `name@major` (e.g. `query:orders@2`): that major only.
 * - `name` (no major): every major of that capability.
 *
 * The capability a caller asks about should be the most specific form it knows: the chosen
 * candidate capability's `name@major` when it has a major (from its name or version), else the
 * bare name. A bare name asked about is allowed by a grant for that name with any pinned major
 * too — the candidate has no major to compare, so the name part decides. A topic name (fan-out)
 * is asked about like a capability name. `null` (a message addressed to an agent id) is only
 * allowed by an all-capabilities grant.
 *
 * Lookups are O(1): one map probe for the domain pair, then one or two set probes.
 */
export interface DomainGrant {
  readonly from_domain: string;
  readonly to_domain: string;
  /** `name@major`, `name`, or null for every capability. */
  readonly capability: string | null;
}

/** The wildcard's spelling in grant ids. */
const ALL = '*';

/**
 * The id of a grant: `from|to|capability` with `*` for every capability. Deterministic, so a
 * repeated PUT is the same grant and the compacted reach.grants.v1 keeps one record per grant.
 * `|` and `*` can appear neither in a domain nor in a capability name.
 */
export function grantId(grant: DomainGrant): string {
  return `${grant.from_domain}|${grant.to_domain}|${grant.capability === null ? ALL : canonicalCapability(grant.capability)}`;
}

/** `name@02` and `name@2` are the same pin; everything else is kept as given (matching is exact). */
function canonicalCapability(capability: string): string {
  const a = parseAddress(capability);
  return a.major === undefined ? a.name : `${a.name}@${a.major}`;
}

function pairKey(from: string, to: string): string {
  return `${from}|${to}`;
}

/** The grants of one (from, to) pair. */
interface PairGrants {
  /** An all-capabilities grant exists. */
  all: boolean;
  /** Canonical `name@major` and bare `name` grants. */
  readonly names: Set<string>;
  /** Per capability name, how many `name@major` grants exist (for bare-name questions). */
  readonly pinnedByName: Map<string, number>;
}

/**
 * Every grant, indexed for the question "may `from` reach `to` for this capability?". Adding
 * a grant twice is a no-op, and removing one that is not there too, so it can follow a change
 * feed that repeats records (reach.grants.v1 is re-published whole when a registry starts).
 */
export class GrantIndex {
  private readonly pairs = new Map<string, PairGrants>();
  private count = 0;

  static of(grants: Iterable<DomainGrant>): GrantIndex {
    const index = new GrantIndex();
    for (const g of grants) index.add(g);
    return index;
  }

  /** How many distinct grants the index holds. */
  get size(): number {
    return this.count;
  }

  add(grant: DomainGrant): void {
    const key = pairKey(grant.from_domain, grant.to_domain);
    let pair = this.pairs.get(key);
    if (!pair) this.pairs.set(key, (pair = { all: false, names: new Set(), pinnedByName: new Map() }));
    if (grant.capability === null) {
      if (!pair.all) this.count++;
      pair.all = true;
      return;
    }
    const name = canonicalCapability(grant.capability);
    if (pair.names.has(name)) return;
    pair.names.add(name);
    this.count++;
    const { name: base, major } = parseAddress(name);
    if (major !== undefined) pair.pinnedByName.set(base, (pair.pinnedByName.get(base) ?? 0) + 1);
  }

  remove(grant: DomainGrant): void {
    const key = pairKey(grant.from_domain, grant.to_domain);
    const pair = this.pairs.get(key);
    if (!pair) return;
    if (grant.capability === null) {
      if (pair.all) this.count--;
      pair.all = false;
    } else {
      const name = canonicalCapability(grant.capability);
      if (!pair.names.delete(name)) return;
      this.count--;
      const { name: base, major } = parseAddress(name);
      if (major !== undefined) {
        const left = (pair.pinnedByName.get(base) ?? 1) - 1;
        if (left > 0) pair.pinnedByName.set(base, left);
        else pair.pinnedByName.delete(base);
      }
    }
    if (!pair.all && pair.names.size === 0) this.pairs.delete(key);
  }

  /** Is there any grant from → to (for some capability)? Correlated replies travel back along it. */
  hasAny(fromDomain: string, toDomain: string): boolean {
    return fromDomain === toDomain || this.pairs.has(pairKey(fromDomain, toDomain));
  }

  /** See domainAllows. */
  allows(fromDomain: string, toDomain: string, capability: string | null): boolean {
    if (fromDomain === toDomain) return true;
    const pair = this.pairs.get(pairKey(fromDomain, toDomain));
    if (!pair) return false;
    if (pair.all) return true;
    if (capability === null) return false;
    const { name, major } = parseAddress(capability);
    if (pair.names.has(name)) return true; // a grant for every major of this name
    return major === undefined ? pair.pinnedByName.has(name) : pair.names.has(`${name}@${major}`);
  }
}

/**
 * May a message from an agent of `fromDomain` be delivered to an agent of `toDomain` for
 * `capability` (see the module comment for the forms)? Same domain: always.
 */
export function domainAllows(index: GrantIndex, fromDomain: string, toDomain: string, capability: string | null): boolean {
  return index.allows(fromDomain, toDomain, capability);
}
