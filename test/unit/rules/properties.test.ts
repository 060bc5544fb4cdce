import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { compileRules, findUnreachable, naiveMatch, whenCovers, whenMatches, type Rule } from '@reach/rules';
import { allInputs, ruleInput, ruleList, when } from './fixtures.js';

const INPUTS = allInputs();

describe('compiled matcher (R-B11: first match wins)', () => {
  it('agrees with the first-match scan on random rules and messages', () => {
    fc.assert(
      fc.property(ruleList(40), fc.array(ruleInput, { minLength: 1, maxLength: 20 }), (list, inputs) => {
        const compiled = compileRules(list);
        for (const input of inputs) expect(compiled.match(input)).toBe(naiveMatch(list, input));
      }),
      { numRuns: 2500 },
    );
  });

  it('agrees with the scan on every message shape, for larger rule lists', () => {
    fc.assert(
      fc.property(ruleList(120), (list) => {
        const compiled = compileRules(list);
        for (let i = 0; i < INPUTS.length; i += 7) expect(compiled.match(INPUTS[i]!)).toBe(naiveMatch(list, INPUTS[i]!));
      }),
      { numRuns: 100 },
    );
  });
});

describe('shadowing check', () => {
  /** The rules that are the first match of no message at all, by brute force. */
  function neverFirst(list: readonly Rule[]): string[] {
    const first = new Set<Rule>();
    for (const input of INPUTS) {
      const hit = naiveMatch(list, input);
      if (hit) first.add(hit);
    }
    return list.filter((r) => !first.has(r)).map((r) => r.name);
  }

  it('reports exactly the rules no message reaches first (brute force over the alphabet)', () => {
    fc.assert(
      fc.property(ruleList(8), (list) => {
        expect(findUnreachable(list).map((u) => u.rule.name)).toEqual(neverFirst(list));
      }),
      { numRuns: 600 },
    );
  });

  it('names earlier rules that really match every message the shadowed rule matches', () => {
    fc.assert(
      fc.property(ruleList(8), (list) => {
        for (const { rule, shadowedBy } of findUnreachable(list)) {
          expect(shadowedBy.every((r) => r.index < rule.index)).toBe(true);
          for (const input of INPUTS) if (whenMatches(rule.when, input)) expect(shadowedBy.some((r) => whenMatches(r.when, input))).toBe(true);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('one rule covers another exactly when no message matches the second but not the first', () => {
    fc.assert(
      fc.property(when, when, (a, b) => {
        const witness = INPUTS.some((input) => whenMatches(b, input) && !whenMatches(a, input));
        expect(whenCovers(a, b)).toBe(!witness);
      }),
      { numRuns: 2000 },
    );
  });
});
