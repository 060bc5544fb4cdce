import { Ajv, type ErrorObject } from 'ajv';
import { RULES_JSON_SCHEMA } from './schema.js';
import type { Diagnostic } from './types.js';
import type { YamlSource } from './yaml-source.js';

/**
 * Structural validation with the JSON Schema, each ajv error turned into one readable
 * diagnostic at the line and column of the offending node:
 *   rule "route_to_retriever": action.dispatch must be one of random, sticky, weighted, broadcast (got "rnadom")
 */

// logger off: a package never prints; strict mode still rejects a malformed schema at start.
const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, logger: false });
ajv.addVocabulary(['x-expect']);
const validateFile = ajv.compile(RULES_JSON_SCHEMA);

export interface SchemaResult {
  diagnostics: Diagnostic[];
  /** positions (in `rules:`) of the rules with at least one schema error */
  invalidRules: Set<number>;
}

export function schemaDiagnostics(value: unknown, src: YamlSource): SchemaResult {
  const result: SchemaResult = { diagnostics: [], invalidRules: new Set() };
  if (validateFile(value)) return result;
  for (const error of relevant(validateFile.errors ?? [])) {
    const path = pointerSegments(error.instancePath);
    if (path[0] === 'rules' && path.length >= 2) result.invalidRules.add(Number(path[1]));
    result.diagnostics.push(toDiagnostic(error, path, value, src));
  }
  return result;
}

/**
 * Drops the noise of a failed value: the `if` wrappers of the match and tag schemas, and every
 * other complaint about a value that already has the wrong type.
 */
function relevant(errors: readonly ErrorObject[]): ErrorObject[] {
  const wrongType = new Set(errors.filter((e) => e.keyword === 'type').map((e) => e.instancePath));
  const seen = new Set<string>();
  return errors.filter((e) => {
    if (e.keyword === 'if') return false;
    if (wrongType.has(e.instancePath) && e.keyword !== 'type') return false;
    const id = `${e.instancePath}\u0000${e.keyword}\u0000${JSON.stringify(e.params)}`;
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}

function pointerSegments(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function toDiagnostic(error: ErrorObject, path: string[], value: unknown, src: YamlSource): Diagnostic {
  const { label, ruleName, subject } = describePath(path, value);
  const expect = (error.parentSchema as { 'x-expect'?: string } | undefined)?.['x-expect'];
  const got = ` (got ${describeValue(error.data)})`;
  const p = error.params as Record<string, unknown>;
  let at = src.valueAt(path);
  let text: string;
  switch (error.keyword) {
    case 'type':
      text = `${subject} must be ${expect ?? article(String(p.type))}${got}`;
      break;
    case 'enum':
      text = `${subject} must be one of ${(p.allowedValues as unknown[]).join(', ')}${got}`;
      break;
    case 'const':
      text = `${subject} must be ${JSON.stringify(p.allowedValue)}${got}`;
      break;
    case 'pattern':
    case 'minimum':
    case 'maximum':
      text = `${subject} must be ${expect ?? error.message}${got}`;
      break;
    case 'minLength':
      text = `${subject} must not be empty`;
      break;
    case 'minItems':
      text = `${subject} must not be an empty list`;
      break;
    case 'minProperties':
    case 'maxProperties':
      text = `${subject} must have exactly one key, one of ${Object.keys(schemaProperties(error)).join(', ')}`;
      break;
    case 'required': {
      const missing = String(p.missingProperty);
      text = path.length === 0 ? `missing required top-level field "${missing}"` : `${subject} is missing required field "${missing}"`;
      break;
    }
    case 'additionalProperties': {
      const field = String(p.additionalProperty);
      const known = Object.keys(schemaProperties(error));
      const suggestion = closest(field, known);
      const hint = suggestion ? `did you mean "${suggestion}"?` : `expected one of ${known.join(', ')}`;
      at = src.keyAt(path, field);
      if (path.length === 0) text = `unknown field "${field}" (${hint})`;
      else if (isRuleRoot(path)) text = `${subject}: unknown field "${field}" (${hint})`;
      else text = `unknown field "${subject}.${field}" (${hint})`;
      break;
    }
    default:
      text = `${subject} ${error.message ?? 'is invalid'}`;
  }
  return { severity: 'error', at, message: label + text, ...(ruleName ? { rule: ruleName } : {}) };
}

function schemaProperties(error: ErrorObject): Record<string, unknown> {
  return ((error.parentSchema as { properties?: Record<string, unknown> } | undefined)?.properties ?? {}) as Record<string, unknown>;
}

function isRuleRoot(path: string[]): boolean {
  return path.length === 2 && path[0] === 'rules';
}

/**
 * "rule "x": " for anything inside a rule, and the field path relative to it
 * (action.dispatch, when.message_type[1]); top-level fields are named as they are.
 */
function describePath(path: string[], value: unknown): { label: string; ruleName?: string; subject: string } {
  const join = (segments: string[]) => segments.map((s, i) => (/^\d+$/.test(s) ? `[${s}]` : i === 0 ? s : `.${s}`)).join('');
  if (path.length === 0) return { label: '', subject: 'the file' };
  if (path[0] !== 'rules' || path.length < 2) return { label: '', subject: join(path) };
  const index = Number(path[1]);
  const raw = (value as { rules?: unknown[] }).rules?.[index];
  const name = raw !== null && typeof raw === 'object' && typeof (raw as { name?: unknown }).name === 'string' ? (raw as { name: string }).name : undefined;
  const rule = name !== undefined ? `rule "${name}"` : `rule #${index + 1}`;
  if (path.length === 2) return { label: '', ...(name ? { ruleName: name } : {}), subject: rule };
  return { label: `${rule}: `, ...(name ? { ruleName: name } : {}), subject: join(path.slice(2)) };
}

export function describeValue(data: unknown): string {
  if (data === null || data === undefined) return 'nothing';
  if (Array.isArray(data)) return 'a list';
  if (typeof data === 'object') return 'a mapping';
  if (typeof data === 'string') return JSON.stringify(data);
  return String(data);
}

function article(type: string): string {
  return type === 'object' ? 'a mapping' : type === 'array' ? 'a list' : type === 'integer' ? 'an integer' : `a ${type}`;
}

/** The known name a typo most likely meant: within two edits, or one (long enough) name containing the other. */
function closest(word: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of known) {
    const contains = Math.min(word.length, candidate.length) >= 4 && (candidate.includes(word) || word.includes(candidate));
    const d = contains ? 1 : editDistance(word, candidate);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}
