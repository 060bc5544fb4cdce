import type { Capability, CapabilityMode } from '@reach/envelope';

/**
 * What a message addresses: a capability or topic name, optionally pinned to a major version
 * with `name@major` (R-A7). Matching is exact on the name (R-B1): `query:orders`
 * never matches `query:order_items`, and no prefix, glob or case folding is ever applied.
 */
export interface Address {
  readonly name: string;
  /** The pinned major version, or undefined when any version will do. */
  readonly major: number | undefined;
}

const PINNED = /^(.+)@(\d{1,9})$/;

export function parseAddress(raw: string): Address {
  const m = PINNED.exec(raw);
  return m ? { name: m[1]!, major: Number(m[2]) } : { name: raw, major: undefined };
}

/** The major version of a capability's `version` ("2", "2.1", "v2.1.0" → 2), or undefined. */
export function majorOf(version: string | null | undefined): number | undefined {
  if (version === null || version === undefined) return undefined;
  const m = /^v?(\d{1,9})(?:\.|$)/.exec(version.trim());
  return m ? Number(m[1]) : undefined;
}

/**
 * Does this capability answer the address in this mode? An unversioned capability answers
 * only unpinned addresses: a caller who pins a major asked for a guarantee that an agent
 * declaring no version cannot give.
 */
export function capabilityMatches(cap: Capability, address: Address, mode: CapabilityMode): boolean {
  if (cap.name !== address.name || cap.mode !== mode) return false;
  return address.major === undefined || majorOf(cap.version) === address.major;
}

/** Every required tag is carried by the capability (R-B2 tag filter). */
export function hasAllTags(cap: Capability, required: readonly string[]): boolean {
  return required.every((t) => cap.tags.includes(t));
}
