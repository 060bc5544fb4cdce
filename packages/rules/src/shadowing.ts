import { compileRules } from './compile.js';
import { stringMatches, whenCovers, whenIntersects, whenMatches } from './conditions.js';
import type { Rule, RuleInput, RuleWhen, StringMatch } from './types.js';

/**
 * Which rules can never be the first match. Rule B is unreachable when every message B matches
 * is matched by an earlier rule — one earlier rule alone (the usual case: same or wider `when`),
 * or several together (`any_of: [a, b]` after a rule for `a` and one for `b`).
 *
 * The check is exact. Whether B is the first match of a message depends only on which of the
 * (finitely many) values and prefixes written in the rules each field equals or starts with, so
 * a few representative messages per rule decide it:
 *  - message_type / target_role: B's exact or any_of values; for a prefix q, q + a character no
 *    rule uses, and every value or prefix of the earlier rules that starts with q (itself and +
 *    that character); no condition: a value no rule mentions (target_role: none at all);
 *  - source roles: one role, taken like above (more roles only let more earlier rules match);
 *    no condition: no role;
 *  - tags: exactly B's tags (more tags only let more earlier rules match).
 * B is unreachable iff an earlier rule matches each representative. Products larger than
 * MAX_REPRESENTATIVES are only checked rule against rule (never a false report, possibly a
 * missed one).
 */

export interface Unreachable {
  rule: Rule;
  /** the earlier rules that together match everything `rule` matches, in file order */
  shadowedBy: Rule[];
}

const MAX_REPRESENTATIVES = 20_000;

export function findUnreachable(rules: readonly Rule[]): Unreachable[] {
  const fresh = freshCharacter(rules);
  const compiled = compileRules(rules, '');
  const out: Unreachable[] = [];
  rules.forEach((rule, position) => {
    // Fast path: B is the first match of its plainest message — reachable, no need to look further.
    const first = compiled.match(plainestInput(rule.when, fresh));
    if (first === rule) return;
    const earlier = rules.slice(0, position).filter((a) => whenIntersects(a.when, rule.when));
    const alone = earlier.find((a) => whenCovers(a.when, rule.when));
    if (alone) return out.push({ rule, shadowedBy: [alone] });
    const together = coveredTogether(rule.when, earlier, fresh);
    if (together) out.push({ rule, shadowedBy: together });
  });
  return out;
}

function coveredTogether(when: RuleWhen, earlier: readonly Rule[], fresh: string): Rule[] | null {
  const types = representatives(when.message_type, earlier, (w) => w.message_type, fresh);
  const targets = when.target_role ? representatives(when.target_role, earlier, (w) => w.target_role, fresh) : [null];
  const sources = when.source_role ? representatives(when.source_role, earlier, (w) => w.source_role, fresh).map((r) => [r]) : [[]];
  if (types.length * targets.length * sources.length > MAX_REPRESENTATIVES) return null;
  const tags = when.custom_tags ?? [];
  const by = new Set<Rule>();
  for (const message_type of types)
    for (const target_role of targets)
      for (const source_roles of sources) {
        const input: RuleInput = { message_type, target_role, source_roles, tags };
        const first = earlier.find((a) => whenMatches(a.when, input));
        if (!first) return null;
        by.add(first);
      }
  return [...by].sort((a, b) => a.index - b.index);
}

function representatives(cond: StringMatch | undefined, earlier: readonly Rule[], field: (w: RuleWhen) => StringMatch | undefined, fresh: string): string[] {
  if (!cond) return [fresh];
  if ('exact' in cond) return [cond.exact];
  if ('any_of' in cond) return [...new Set(cond.any_of)];
  const out = new Set([cond.prefix + fresh]);
  for (const rule of earlier) {
    const other = field(rule.when);
    if (!other) continue;
    if ('prefix' in other) {
      if (other.prefix.startsWith(cond.prefix)) out.add(other.prefix).add(other.prefix + fresh);
    } else {
      for (const v of 'exact' in other ? [other.exact] : other.any_of) if (stringMatches(cond, v)) out.add(v);
    }
  }
  return [...out];
}

/** The message with the fewest matching rules among those the rule matches. */
function plainestInput(when: RuleWhen, fresh: string): RuleInput {
  const one = (cond: StringMatch | undefined): string | null => {
    if (!cond) return null;
    if ('exact' in cond) return cond.exact;
    if ('any_of' in cond) return cond.any_of[0]!;
    return cond.prefix + fresh;
  };
  const source = one(when.source_role);
  return {
    message_type: one(when.message_type) ?? fresh,
    target_role: one(when.target_role),
    source_roles: source === null ? [] : [source],
    tags: when.custom_tags ?? [],
  };
}

/** One character that appears in no value or prefix of any rule. */
function freshCharacter(rules: readonly Rule[]): string {
  const used = new Set<number>();
  const note = (cond: StringMatch | undefined) => {
    if (!cond) return;
    for (const s of 'exact' in cond ? [cond.exact] : 'prefix' in cond ? [cond.prefix] : cond.any_of)
      for (let i = 0; i < s.length; i++) used.add(s.charCodeAt(i));
  };
  for (const { when } of rules) [when.message_type, when.target_role, when.source_role].forEach(note);
  let code = 0;
  while (used.has(code)) code++;
  return String.fromCharCode(code);
}
