import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { GrantIndex, domainAllows, grantId, parseAddress, type DomainGrant } from '@reach/routing';

const g = (from_domain: string, to_domain: string, capability: string | null = null): DomainGrant => ({ from_domain, to_domain, capability });

describe('security domains (R-A8)', () => {
  it('always allows delivery inside a domain, even with no grant at all', () => {
    const index = new GrantIndex();
    expect(domainAllows(index, 'sales', 'sales', 'query:orders')).toBe(true);
    expect(domainAllows(index, 'default', 'default', null)).toBe(true);
  });

  it('denies delivery across domains without a grant, and in the other direction of a grant', () => {
    const index = GrantIndex.of([g('sales', 'finance')]);
    expect(domainAllows(index, 'sales', 'finance', 'query:orders')).toBe(true);
    expect(domainAllows(index, 'finance', 'sales', 'query:orders')).toBe(false);
    expect(domainAllows(index, 'sales', 'hr', 'query:orders')).toBe(false);
  });

  it('an all-capabilities grant also allows messages addressed to an agent id (capability null)', () => {
    expect(domainAllows(GrantIndex.of([g('a', 'b')]), 'a', 'b', null)).toBe(true);
    expect(domainAllows(GrantIndex.of([g('a', 'b', 'query:orders')]), 'a', 'b', null)).toBe(false);
  });

  it('a grant for name@major allows that major only, and a bare name asked about', () => {
    const index = GrantIndex.of([g('a', 'b', 'query:orders@2')]);
    expect(domainAllows(index, 'a', 'b', 'query:orders@2')).toBe(true);
    expect(domainAllows(index, 'a', 'b', 'query:orders@3')).toBe(false);
    // The candidate has no major to compare: the name part decides (documented in domains.ts).
    expect(domainAllows(index, 'a', 'b', 'query:orders')).toBe(true);
    // Exact names (R-B1): never a prefix or a neighbour.
    expect(domainAllows(index, 'a', 'b', 'query:order_items@2')).toBe(false);
    expect(domainAllows(index, 'a', 'b', 'query:order@2')).toBe(false);
  });

  it('a grant for a bare name allows every major of it', () => {
    const index = GrantIndex.of([g('a', 'b', 'summarize_text')]);
    for (const c of ['summarize_text', 'summarize_text@1', 'summarize_text@7']) expect(domainAllows(index, 'a', 'b', c)).toBe(true);
    expect(domainAllows(index, 'a', 'b', 'summarize_texts')).toBe(false);
  });

  it('follows a change feed: adds and removes are idempotent, and removing one pin keeps the others', () => {
    const index = new GrantIndex();
    index.add(g('a', 'b', 'x_y@1'));
    index.add(g('a', 'b', 'x_y@1'));
    index.add(g('a', 'b', 'x_y@2'));
    expect(index.size).toBe(2);
    index.remove(g('a', 'b', 'x_y@1'));
    expect(domainAllows(index, 'a', 'b', 'x_y@1')).toBe(false);
    expect(domainAllows(index, 'a', 'b', 'x_y')).toBe(true); // x_y@2 still there
    index.remove(g('a', 'b', 'x_y@2'));
    index.remove(g('a', 'b', 'x_y@2'));
    index.remove(g('c', 'd'));
    expect(index.size).toBe(0);
    expect(domainAllows(index, 'a', 'b', 'x_y')).toBe(false);
  });

  it('hasAny: some grant from → to, whatever its capability (same domain: always)', () => {
    const index = GrantIndex.of([g('a', 'b', 'x_y@1')]);
    expect(index.hasAny('a', 'b')).toBe(true);
    expect(index.hasAny('b', 'a')).toBe(false);
    expect(index.hasAny('c', 'c')).toBe(true);
  });

  it('names grants deterministically: from|to|capability, * for every capability, canonical majors', () => {
    expect(grantId(g('sales', 'finance'))).toBe('sales|finance|*');
    expect(grantId(g('sales', 'finance', 'query:orders@2'))).toBe('sales|finance|query:orders@2');
    expect(grantId(g('sales', 'finance', 'query:orders@02'))).toBe(grantId(g('sales', 'finance', 'query:orders@2')));
  });
});

/** The specification, written as a scan over every grant. */
function naiveAllows(grants: readonly DomainGrant[], from: string, to: string, capability: string | null): boolean {
  if (from === to) return true;
  return grants.some((gr) => {
    if (gr.from_domain !== from || gr.to_domain !== to) return false;
    if (gr.capability === null) return true;
    if (capability === null) return false;
    const want = parseAddress(capability);
    const have = parseAddress(gr.capability);
    if (have.name !== want.name) return false;
    return have.major === undefined || want.major === undefined || have.major === want.major;
  });
}

describe('GrantIndex agrees with a naive scan over the grants', () => {
  const domain = fc.constantFrom('a', 'b', 'c');
  const capability = fc.oneof(
    fc.constant(null),
    fc
      .tuple(fc.constantFrom('x_y', 'x_yz', 'q:r'), fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }))
      .map(([n, m]) => (m === undefined ? n : `${n}@${m}`)),
  );
  const grant = fc.record({ from_domain: domain, to_domain: domain, capability });
  const op = fc.record({ add: fc.boolean(), grant });

  it('after any sequence of adds and removes, for every question', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), fc.array(fc.tuple(domain, domain, capability), { minLength: 1, maxLength: 30 }), (ops, questions) => {
        const index = new GrantIndex();
        const live = new Map<string, DomainGrant>();
        for (const { add, grant: gr } of ops) {
          if (add) {
            index.add(gr);
            live.set(grantId(gr), gr);
          } else {
            index.remove(gr);
            live.delete(grantId(gr));
          }
        }
        expect(index.size).toBe(live.size);
        for (const [from, to, c] of questions) {
          expect(domainAllows(index, from, to, c), `${from}→${to} ${c}`).toBe(naiveAllows([...live.values()], from, to, c));
        }
      }),
      { numRuns: 500 },
    );
  });
});
