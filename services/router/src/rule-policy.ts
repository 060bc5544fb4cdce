import type { Rule } from '@reach/rules';
import type { MatchedRule } from './outputs.js';

export function matchedRule(rule: Rule | null): MatchedRule | null {
  return rule === null ? null : { name: rule.name, fallback: rule.fallback };
}
