import { readFile } from 'node:fs/promises';
import { compileRules, sha256 } from './compile.js';
import { semanticDiagnostics } from './semantics.js';
import type { Diagnostic, FallbackAction, ParseResult, Rule, RuleAction, RulePriority, RuleWhen, StringMatch } from './types.js';
import { schemaDiagnostics } from './validate.js';
import { YamlSource } from './yaml-source.js';

/**
 * Parses, validates and compiles a rules file. Every problem found is reported — YAML syntax
 * first (nothing else can be trusted then), else schema and semantic diagnostics together —
 * sorted by position. `rules` is null iff any diagnostic is an error.
 */
export function parseRules(source: string, file: string): ParseResult {
  const src = new YamlSource(source, file);
  const syntax = src.syntaxDiagnostics();
  if (syntax.some((d) => d.severity === 'error')) return done(null, syntax);

  let value: unknown;
  try {
    value = src.doc.toJS({ maxAliasCount: 1000 });
  } catch (err) {
    // e.g. an alias bomb: refused rather than expanded
    return done(null, [...syntax, { severity: 'error', at: src.position(0), message: `invalid YAML: ${(err as Error).message}` }]);
  }
  const schema = schemaDiagnostics(value, src);
  const raw = rawRules(value);
  const rules: Rule[] = [];
  raw.forEach((item, index) => {
    if (!schema.invalidRules.has(index)) rules.push(toRule(item as RawRule, index, src));
  });
  // Rules are checked against each other whenever there is a `rules:` list, even if something
  // else in the file is wrong, so one run reports everything.
  const listed = Array.isArray((value as { rules?: unknown } | null)?.rules);
  const diagnostics = [...syntax, ...schema.diagnostics, ...(listed ? semanticDiagnostics(src, raw, rules) : [])];
  const failed = diagnostics.some((d) => d.severity === 'error');
  return done(failed ? null : compileRules(rules, sha256(source)), diagnostics);
}

/** Reads and parses a rules file; a file that cannot be read is reported as a diagnostic too. */
export async function loadRulesFile(path: string): Promise<ParseResult> {
  let source: string;
  try {
    source = await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    return { rules: null, diagnostics: [{ severity: 'error', at: { file: path, line: 1, column: 1 }, message: `cannot read the rules file (${code})` }] };
  }
  return parseRules(source, path);
}

/** "file:line:column: error: message", the form editors and CI logs link to. */
export function formatDiagnostic(d: Diagnostic): string {
  return `${d.at.file}:${d.at.line}:${d.at.column}: ${d.severity}: ${d.message}`;
}

function done(rules: ParseResult['rules'], diagnostics: Diagnostic[]): ParseResult {
  diagnostics.sort((a, b) => a.at.line - b.at.line || a.at.column - b.at.column);
  return { rules, diagnostics };
}

type RawMatch = string | string[] | { exact: string } | { prefix: string } | { any_of: string[] };
interface RawRule {
  name: string;
  when: { message_type?: RawMatch; target_role?: RawMatch; source_role?: RawMatch; custom_tags?: string | string[] };
  action: { dispatch: RuleAction['dispatch']; sticky_by?: string; priority?: string; timeout_ms?: number };
  fallback?: { if_no_available_agent: FallbackAction };
}

function rawRules(value: unknown): unknown[] {
  const list = value !== null && typeof value === 'object' ? (value as { rules?: unknown }).rules : undefined;
  return Array.isArray(list) ? list : [];
}

/** A rule that passed the schema, in the normalised form the matcher uses. */
function toRule(raw: RawRule, index: number, src: YamlSource): Rule {
  const when: RuleWhen = {};
  for (const field of ['message_type', 'target_role', 'source_role'] as const) {
    const cond = raw.when[field];
    if (cond !== undefined) when[field] = toStringMatch(cond);
  }
  const tags = raw.when.custom_tags;
  if (tags !== undefined) when.custom_tags = typeof tags === 'string' ? [tags] : [...tags];

  const action: RuleAction = { dispatch: raw.action.dispatch };
  if (raw.action.sticky_by !== undefined) action.sticky_by = raw.action.sticky_by;
  if (raw.action.priority !== undefined) action.priority = raw.action.priority.toUpperCase() as RulePriority;
  if (raw.action.timeout_ms !== undefined) action.timeout_ms = raw.action.timeout_ms;

  return { name: raw.name, index, when, action, fallback: raw.fallback?.if_no_available_agent ?? null, at: src.valueAt(['rules', index]) };
}

function toStringMatch(raw: RawMatch): StringMatch {
  if (typeof raw === 'string') return { exact: raw };
  if (Array.isArray(raw)) return { any_of: [...raw] };
  if ('any_of' in raw) return { any_of: [...raw.any_of] };
  return 'exact' in raw ? { exact: raw.exact } : { prefix: raw.prefix };
}
