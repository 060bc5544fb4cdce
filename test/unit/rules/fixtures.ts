import fc from 'fast-check';
import { parseRules, formatDiagnostic, type Rule, type RuleInput, type RuleWhen, type StringMatch } from '@reach/rules';

/** Formatted diagnostics of a source, in order: what `reach rules check` prints. */
export function check(source: string, file = 'rules.yaml'): string[] {
  return parseRules(source, file).diagnostics.map(formatDiagnostic);
}

/** A rule built in code (as the property tests and compiler tests need them). */
export function rule(name: string, when: RuleWhen, index = 0): Rule {
  return { name, index, when, action: { dispatch: 'random' }, fallback: null, at: { file: 'test', line: index + 1, column: 1 } };
}

export function rules(...whens: RuleWhen[]): Rule[] {
  return whens.map((when, i) => rule(`r${i}`, when, i));
}

export const input = (o: Partial<RuleInput> = {}): RuleInput => ({ message_type: 'task', target_role: null, source_roles: [], tags: [], ...o });

// Small alphabets, with values that are prefixes of one another, so conditions overlap, imply
// and shadow each other often. `z` occurs in no condition: `v + 'z'` is a value that starts with
// v's prefixes but equals no written value, and `z` alone matches no condition at all.
export const VALUES = ['a', 'ab', 'abc', 'b'] as const;
export const TAGS = ['t1', 't2'] as const;
export const UNIVERSE = [...VALUES, ...VALUES.map((v) => `${v}z`), 'z'];

const value = fc.constantFrom(...VALUES);

export const stringMatch: fc.Arbitrary<StringMatch | undefined> = fc.oneof(
  { weight: 3, arbitrary: fc.constant(undefined) },
  { weight: 3, arbitrary: value.map((exact) => ({ exact })) },
  { weight: 2, arbitrary: value.map((prefix) => ({ prefix })) },
  { weight: 2, arbitrary: fc.uniqueArray(value, { minLength: 1, maxLength: 3 }).map((any_of) => ({ any_of })) },
);

export const when: fc.Arbitrary<RuleWhen> = fc
  .record({
    message_type: stringMatch,
    target_role: stringMatch,
    source_role: fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: stringMatch }),
    custom_tags: fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.subarray([...TAGS], { minLength: 1 }) }),
  })
  .map((w) => Object.fromEntries(Object.entries(w).filter(([, v]) => v !== undefined)) as RuleWhen);

export const ruleList = (maxLength: number): fc.Arbitrary<Rule[]> => fc.array(when, { maxLength }).map((ws) => rules(...ws));

export const ruleInput: fc.Arbitrary<RuleInput> = fc.record({
  message_type: fc.constantFrom(...UNIVERSE),
  target_role: fc.option(fc.constantFrom(...UNIVERSE), { nil: null }),
  source_roles: fc.array(fc.constantFrom(...UNIVERSE), { maxLength: 3 }),
  tags: fc.subarray([...TAGS, 'other']),
});

/**
 * Every message shape that can matter for rules over VALUES: each field takes every value of
 * UNIVERSE (target: or none), no source role, one, or two base values, and every tag subset.
 */
export function allInputs(): RuleInput[] {
  const sources: string[][] = [[], ...UNIVERSE.map((v) => [v])];
  for (let i = 0; i < VALUES.length; i++) for (let j = i + 1; j < VALUES.length; j++) sources.push([VALUES[i]!, VALUES[j]!]);
  const tagSets: string[][] = [[], ['t1'], ['t2'], ['t1', 't2']];
  const out: RuleInput[] = [];
  for (const message_type of UNIVERSE)
    for (const target_role of [null, ...UNIVERSE])
      for (const source_roles of sources) for (const tags of tagSets) out.push({ message_type, target_role, source_roles, tags });
  return out;
}
