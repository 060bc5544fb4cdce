/**
 * ReachRule (R-B11): declarative routing rules in YAML — parsing with positions,
 * JSON-Schema and semantic validation, and a compiled first-match matcher. Pure: no I/O but
 * reading the file in loadRulesFile, no logging; the router applies the matched rule.
 */
export type {
  Diagnostic,
  Dispatch,
  FallbackAction,
  ParseResult,
  Rule,
  RuleAction,
  RuleInput,
  RulePriority,
  RuleSet,
  RuleWhen,
  SourcePosition,
  StringMatch,
} from './types.js';
export { DISPATCHES, FALLBACK_ACTIONS, RULE_PRIORITIES, STICKY_FIELDS } from './types.js';
export { parseRules, loadRulesFile, formatDiagnostic } from './parse.js';
export { matchingRules, naiveMatch, ruleMatches, stringMatches, whenCovers, whenMatches } from './conditions.js';
export { compileRules, EMPTY_RULES } from './compile.js';
export { findUnreachable, type Unreachable } from './shadowing.js';
export { RULES_JSON_SCHEMA, MAX_TIMEOUT_MS } from './schema.js';
export { benchRules, type RulesBenchRow } from './bench.js';
