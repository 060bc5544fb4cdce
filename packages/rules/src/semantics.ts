import { findUnreachable } from './shadowing.js';
import { STICKY_FIELDS, type Diagnostic, type Rule } from './types.js';
import type { YamlSource } from './yaml-source.js';

/**
 * Checks the schema cannot express: meaning across rules (duplicate names, rules shadowed by
 * earlier ones) and combinations within one (sticky without sticky_by, sticky_by that nothing
 * reads, repeated values).
 *
 * `raw` is the `rules:` list as written (for names, even of rules with schema errors); `rules`
 * holds the rules that passed the schema, with `index` = position in `raw`.
 */
export function semanticDiagnostics(src: YamlSource, raw: readonly unknown[], rules: readonly Rule[]): Diagnostic[] {
  const out: Diagnostic[] = [];
  if (raw.length === 0) out.push({ severity: 'warning', at: src.valueAt(['rules']), message: 'no rules: every message gets the default routing' });
  duplicateNames(src, raw, out);
  for (const rule of rules) checkRule(src, rule, out);
  for (const { rule, shadowedBy } of findUnreachable(rules)) {
    out.push({
      severity: 'error',
      at: rule.at,
      rule: rule.name,
      message: `rule "${rule.name}" is unreachable: ${shadowReason(shadowedBy)} (first match wins)`,
    });
  }
  return out;
}

function duplicateNames(src: YamlSource, raw: readonly unknown[], out: Diagnostic[]): void {
  const firstAt = new Map<string, number>();
  raw.forEach((item, index) => {
    const name = item !== null && typeof item === 'object' ? (item as { name?: unknown }).name : undefined;
    if (typeof name !== 'string') return;
    const first = firstAt.get(name);
    if (first === undefined) return firstAt.set(name, index);
    const firstLine = src.valueAt(['rules', first, 'name']).line;
    out.push({
      severity: 'error',
      at: src.valueAt(['rules', index, 'name']),
      rule: name,
      message: `duplicate rule name "${name}" (first defined at line ${firstLine})`,
    });
  });
}

function checkRule(src: YamlSource, rule: Rule, out: Diagnostic[]): void {
  const path = ['rules', rule.index];
  const at = (...rest: string[]) => src.valueAt([...path, ...rest]);
  const report = (severity: Diagnostic['severity'], where: string[], message: string) =>
    out.push({ severity, at: at(...where), rule: rule.name, message: `rule "${rule.name}": ${message}` });

  const { dispatch, sticky_by } = rule.action;
  if (dispatch === 'sticky' && sticky_by === undefined) {
    report('error', ['action', 'dispatch'], `action.sticky_by is required when dispatch is sticky (one of ${STICKY_FIELDS.join(', ')} or headers.<name>)`);
  }
  if (dispatch !== 'sticky' && sticky_by !== undefined) {
    report('warning', ['action', 'sticky_by'], `action.sticky_by is ignored: only dispatch sticky uses it (dispatch is ${dispatch})`);
  }
  for (const field of ['message_type', 'target_role', 'source_role'] as const) {
    const cond = rule.when[field];
    if (cond && 'any_of' in cond && new Set(cond.any_of).size !== cond.any_of.length) {
      report('warning', ['when', field], `when.${field} lists a value more than once`);
    }
  }
  const tags = rule.when.custom_tags;
  if (tags && new Set(tags).size !== tags.length) report('warning', ['when', 'custom_tags'], 'when.custom_tags lists a tag more than once');
}

function shadowReason(by: readonly Rule[]): string {
  const ref = (r: Rule) => `rule "${r.name}" (line ${r.at.line})`;
  if (by.length === 1) {
    const only = by[0]!;
    const empty = Object.keys(only.when).length === 0;
    return empty ? `${ref(only)} has an empty when: it matches every message` : `${ref(only)} already matches every message it matches`;
  }
  return `rules ${by.map((r) => `"${r.name}" (line ${r.at.line})`).join(', ')} together already match every message it matches`;
}
