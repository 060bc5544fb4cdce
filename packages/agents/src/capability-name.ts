import { CAPABILITY_NAME_PATTERN } from '@reach/core';
/** The capability tag grammar (R-A1, R-A2, R-A7): @reach/core's grammar.ts, re-exported for the agents' users. */
export { CAPABILITY_NAME_PATTERN };

/** Longest accepted capability name (it becomes part of Redis keys and Kafka headers). */
export const MAX_CAPABILITY_NAME_LENGTH = 128;

/**
 * Words that say nothing about what an agent does. A name made only of these (`do`,
 * `process`, `handle_task`, `do_stuff`) is refused as vague (R-A2): a sender could not
 * tell two such agents apart, and routing by them would send work to the wrong agent.
 */
export const VAGUE_WORDS: ReadonlySet<string> = new Set([
  'do',
  'doit',
  'process',
  'processing',
  'handle',
  'handler',
  'misc',
  'general',
  'generic',
  'task',
  'tasks',
  'run',
  'execute',
  'exec',
  'perform',
  'work',
  'job',
  'jobs',
  'action',
  'actions',
  'stuff',
  'thing',
  'things',
  'any',
  'anything',
  'all',
  'everything',
  'default',
  'other',
  'others',
  'various',
  'util',
  'utils',
  'helper',
  'help',
  'service',
  'agent',
  'request',
  'requests',
  'message',
  'messages',
  'data',
  'item',
  'items',
  'object',
  'call',
  'invoke',
  'manage',
  'operate',
  'op',
  'ops',
  'main',
  'todo',
]);

export interface ParsedCapabilityName {
  /** The name without its `@major` suffix. */
  readonly base: string;
  /** The pinned major version, when the name has one. */
  readonly major: number | undefined;
  /** The words of the base, split on `_` and `:`. */
  readonly words: readonly string[];
  /** `verb:object` form (true) or `verb_object` / single word (false). */
  readonly colon: boolean;
}

/** Parses a name that matches the grammar; undefined when it does not. */
export function parseCapabilityName(name: string): ParsedCapabilityName | undefined {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_CAPABILITY_NAME_LENGTH) return undefined;
  if (!CAPABILITY_NAME_PATTERN.test(name)) return undefined;
  const at = name.indexOf('@');
  const base = at < 0 ? name : name.slice(0, at);
  const major = at < 0 ? undefined : Number(name.slice(at + 1));
  return { base, major, words: base.split(/[_:]/), colon: base.includes(':') };
}

export function isValidCapabilityName(name: string): boolean {
  return parseCapabilityName(name) !== undefined;
}

export type NameProblem = { kind: 'grammar'; message: string } | { kind: 'vague'; message: string } | { kind: 'unknown'; message: string };

/**
 * Why a capability name is refused, or undefined when it is acceptable. `dictionary`, when
 * non-empty, is the allow-list of REACH_CAPABILITY_DICTIONARY: a name is known when its full
 * form or its base is listed.
 */
export function capabilityNameProblem(name: unknown, dictionary: ReadonlySet<string> = new Set()): NameProblem | undefined {
  if (typeof name !== 'string' || name.length === 0) return { kind: 'grammar', message: 'must be a non-empty string' };
  if (name.length > MAX_CAPABILITY_NAME_LENGTH) return { kind: 'grammar', message: `must be at most ${MAX_CAPABILITY_NAME_LENGTH} characters` };
  const parsed = parseCapabilityName(name);
  if (!parsed) {
    return {
      kind: 'grammar',
      message: `"${name}" does not match the tag grammar: verb_object or verb:object, lowercase letters, digits and _, optional @major (e.g. parse_pdf, query:orders, summarize@2)`,
    };
  }
  if (parsed.words.every((w) => VAGUE_WORDS.has(w))) {
    return {
      kind: 'vague',
      message: `"${name}" is too vague to route by: name the action and its object (e.g. parse_pdf, query:orders)`,
    };
  }
  if (dictionary.size > 0 && !dictionary.has(name) && !dictionary.has(parsed.base)) {
    return { kind: 'unknown', message: `"${name}" is not in the capability dictionary (REACH_CAPABILITY_DICTIONARY)` };
  }
  return undefined;
}

/**
 * A single word with no object (`summarize`, `translate`) matches the grammar and is accepted,
 * but it is less precise than `summarize_text`: the registry reports it as a warning.
 */
export function capabilityNameWarning(name: string): string | undefined {
  const parsed = parseCapabilityName(name);
  if (parsed && parsed.words.length === 1) return `"${name}" has no object; prefer verb_object (e.g. ${parsed.base}_text)`;
  return undefined;
}

/** The major version a capability version string starts with (`2`, `2.1.0`, `v3`), if any. */
export function majorOf(version: string | null | undefined): number | undefined {
  if (!version) return undefined;
  const m = /^v?(\d+)(?:\.|$)/i.exec(version.trim());
  return m ? Number(m[1]) : undefined;
}

/** The major a capability offers: its name's `@major`, else its version's major. */
export function offeredMajor(cap: { name: string; version?: string | null }): number | undefined {
  return parseCapabilityName(cap.name)?.major ?? majorOf(cap.version);
}

/**
 * The names a capability is found under in the registry's index and the router's view: its
 * base, and `base@major` when it has a major. A caller that asks for `summarize` finds every
 * major; one that pins `summarize@2` finds only major 2 (R-A7).
 */
export function capabilityIndexNames(cap: { name: string; version?: string | null }): string[] {
  const parsed = parseCapabilityName(cap.name);
  if (!parsed) return [cap.name];
  const major = parsed.major ?? majorOf(cap.version);
  return major === undefined ? [parsed.base] : [parsed.base, `${parsed.base}@${major}`];
}

/** Does a capability satisfy a requested name? Exact on the base; a pinned major must match. */
export function capabilityMatches(requested: string, cap: { name: string; version?: string | null }): boolean {
  const want = parseCapabilityName(requested);
  const have = parseCapabilityName(cap.name);
  if (!want || !have) return requested === cap.name;
  if (want.base !== have.base) return false;
  return want.major === undefined || want.major === (have.major ?? majorOf(cap.version));
}
