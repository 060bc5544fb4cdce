import type { Rule, RuleInput, RuleWhen, StringMatch } from './types.js';

/**
 * The reference semantics of a rule's `when`, field by field. The compiled matcher and the
 * shadowing check must agree with these functions (property-tested).
 */

export function stringMatches(cond: StringMatch, value: string): boolean {
  if ('exact' in cond) return value === cond.exact;
  if ('prefix' in cond) return value.startsWith(cond.prefix);
  return cond.any_of.includes(value);
}

export function whenMatches(when: RuleWhen, input: RuleInput): boolean {
  if (when.message_type && !stringMatches(when.message_type, input.message_type)) return false;
  if (when.target_role && (input.target_role === null || !stringMatches(when.target_role, input.target_role))) return false;
  const source = when.source_role;
  if (source && !input.source_roles.some((role) => stringMatches(source, role))) return false;
  if (when.custom_tags && !when.custom_tags.every((tag) => input.tags.includes(tag))) return false;
  return true;
}

export function ruleMatches(rule: Rule, input: RuleInput): boolean {
  return whenMatches(rule.when, input);
}

/** First match wins, in file order: a plain scan, the meaning every faster matcher must keep. */
export function naiveMatch(rules: readonly Rule[], input: RuleInput): Rule | null {
  for (const rule of rules) if (whenMatches(rule.when, input)) return rule;
  return null;
}

/** Every rule that matches, in file order: the first is the one applied (for explaining a choice). */
export function matchingRules(rules: readonly Rule[], input: RuleInput): Rule[] {
  return rules.filter((rule) => whenMatches(rule.when, input));
}

/** Every value `b` accepts is accepted by `a` (absent = accepts everything). */
export function stringCovers(a: StringMatch | undefined, b: StringMatch | undefined): boolean {
  if (!a) return true;
  // A present condition never accepts every string: values are non-empty, prefixes too.
  if (!b) return false;
  if ('prefix' in b) return 'prefix' in a && b.prefix.startsWith(a.prefix);
  return valuesOf(b).every((v) => stringMatches(a, v));
}

function valuesOf(cond: StringMatch): readonly string[] {
  return 'exact' in cond ? [cond.exact] : 'any_of' in cond ? cond.any_of : [];
}

/** Some value is accepted by both conditions. */
export function stringIntersects(a: StringMatch | undefined, b: StringMatch | undefined): boolean {
  if (!a || !b) return true;
  if ('prefix' in a && 'prefix' in b) return a.prefix.startsWith(b.prefix) || b.prefix.startsWith(a.prefix);
  if ('prefix' in a) return valuesOf(b).some((v) => stringMatches(a, v));
  return valuesOf(a).some((v) => stringMatches(b, v));
}

/**
 * `a` matches every input `b` matches. The fields are independent and each accepts some value,
 * so this holds exactly when it holds field by field; for source_role (any of the producer's
 * roles) a producer with the single role `r` shows `b`'s set must lie inside `a`'s.
 */
export function whenCovers(a: RuleWhen, b: RuleWhen): boolean {
  return (
    stringCovers(a.message_type, b.message_type) &&
    stringCovers(a.target_role, b.target_role) &&
    stringCovers(a.source_role, b.source_role) &&
    (a.custom_tags ?? []).every((tag) => (b.custom_tags ?? []).includes(tag))
  );
}

/**
 * Some input matches both. Tags never conflict (a message may carry any set of them), nor do
 * source roles (a producer may have several roles, one for each rule).
 */
export function whenIntersects(a: RuleWhen, b: RuleWhen): boolean {
  return stringIntersects(a.message_type, b.message_type) && stringIntersects(a.target_role, b.target_role);
}
