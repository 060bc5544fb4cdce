import { performance } from 'node:perf_hooks';
import { seededRandom } from '@reach/core';
import { compileRules } from './compile.js';
import { naiveMatch } from './conditions.js';
import type { Dispatch, Rule, RuleInput, RuleWhen, StringMatch } from './types.js';

/**
 * A micro-benchmark of the compiled matcher against the first-match scan (`reach rules bench`).
 * Rule files are synthetic but shaped like real ones: mostly exact message types and target
 * roles, a few any_of and prefix conditions, a few rules without a condition on one field, some
 * source-role and tag conditions. Most messages are built to satisfy one rule picked at random
 * (so the first match lies anywhere in the file), the rest are random.
 * Not a test: it prints numbers (best of a few rounds), and checks that both matchers agree.
 */

export interface RulesBenchRow {
  rules: number;
  compile_ms: number;
  compiled_ns_per_match: number;
  naive_ns_per_match: number;
  speedup: number;
  /** share of the messages some rule matched */
  matched: number;
}

export interface RulesBenchOptions {
  sizes?: readonly number[];
  /** messages matched per size */
  lookups?: number;
  seed?: number;
}

export function benchRules(opts: RulesBenchOptions = {}): RulesBenchRow[] {
  const sizes = opts.sizes ?? [10, 100, 1000, 10_000];
  const lookups = opts.lookups ?? 5000;
  const random = seededRandom(opts.seed ?? 42);
  return sizes.map((n) => {
    const vocabulary = { types: Math.max(4, Math.ceil(n / 4)), roles: Math.max(4, Math.ceil(n / 2)) };
    const rules = Array.from({ length: n }, (_, i) => syntheticRule(i, random, vocabulary));
    const inputs = Array.from({ length: lookups }, () =>
      random() < 0.8 ? inputFor(rules[Math.floor(random() * n)]!, random, vocabulary) : syntheticInput(random, vocabulary),
    );

    const started = performance.now();
    const compiled = compileRules(rules);
    const compileMs = performance.now() - started;

    let matched = 0;
    for (const input of inputs) {
      const expected = naiveMatch(rules, input);
      if (compiled.match(input) !== expected) throw new Error(`compiled and naive matchers disagree on ${JSON.stringify(input)}`);
      if (expected) matched++;
    }
    const compiledNs = bestOf(() => {
      for (const input of inputs) compiled.match(input);
    });
    const naiveNs = bestOf(() => {
      for (const input of inputs) naiveMatch(rules, input);
    });
    return {
      rules: n,
      compile_ms: round(compileMs, 2),
      compiled_ns_per_match: Math.round(compiledNs / lookups),
      naive_ns_per_match: Math.round(naiveNs / lookups),
      speedup: round(naiveNs / compiledNs, 1),
      matched: round(matched / lookups, 2),
    };
  });
}

/** Best of five rounds after three warm-up rounds, in ns: the machine is shared, the minimum is the signal. */
function bestOf(work: () => void): number {
  for (let warm = 0; warm < 3; warm++) work();
  let best = Infinity;
  for (let round = 0; round < 5; round++) {
    const started = performance.now();
    work();
    best = Math.min(best, performance.now() - started);
  }
  return best * 1e6;
}

type Vocabulary = { types: number; roles: number };

function picker(random: () => number) {
  return (count: number, prefix: string) => `${prefix}${Math.floor(random() * count)}`;
}

function syntheticRule(i: number, random: () => number, vocabulary: Vocabulary): Rule {
  const pick = picker(random);
  const condition = (count: number, prefix: string, absent: number): StringMatch | undefined => {
    const r = random();
    if (r < absent) return undefined;
    if (r < absent + 0.05) return { any_of: [pick(count, prefix), pick(count, prefix), pick(count, prefix)] };
    if (r < absent + 0.1) return { prefix: pick(count, prefix) };
    return { exact: pick(count, prefix) };
  };
  const when: RuleWhen = {};
  const type = condition(vocabulary.types, 'type_', 0.05);
  const target = condition(vocabulary.roles, 'role_', type ? 0.1 : 0);
  if (type) when.message_type = type;
  if (target) when.target_role = target;
  if (random() < 0.1) when.source_role = { exact: pick(vocabulary.roles, 'role_') };
  if (random() < 0.1) when.custom_tags = [pick(8, 'tag_')];
  const dispatch: Dispatch = (['random', 'weighted', 'broadcast'] as const)[i % 3]!;
  return { name: `rule_${i}`, index: i, when, action: { dispatch }, fallback: null, at: { file: 'bench', line: i + 1, column: 1 } };
}

/** A message the rule matches (earlier rules may match it too). */
function inputFor(rule: Rule, random: () => number, vocabulary: Vocabulary): RuleInput {
  const base = syntheticInput(random, vocabulary);
  const satisfy = (cond: StringMatch | undefined, fallback: string) =>
    !cond ? fallback : 'exact' in cond ? cond.exact : 'prefix' in cond ? `${cond.prefix}7` : cond.any_of[Math.floor(random() * cond.any_of.length)]!;
  const { when } = rule;
  return {
    message_type: satisfy(when.message_type, base.message_type),
    target_role: when.target_role ? satisfy(when.target_role, '') : base.target_role,
    source_roles: when.source_role ? [...base.source_roles, satisfy(when.source_role, '')] : base.source_roles,
    tags: [...base.tags, ...(when.custom_tags ?? [])],
  };
}

function syntheticInput(random: () => number, vocabulary: Vocabulary): RuleInput {
  const pick = picker(random);
  return {
    message_type: pick(vocabulary.types, 'type_'),
    target_role: random() < 0.9 ? pick(vocabulary.roles, 'role_') : null,
    source_roles: [pick(vocabulary.roles, 'role_')],
    tags: random() < 0.5 ? [pick(8, 'tag_')] : [],
  };
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
