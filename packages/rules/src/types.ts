/** How the router picks among the capable agents once a rule matched (R-B11). */
export type Dispatch = 'random' | 'sticky' | 'weighted' | 'broadcast';
/** What happens when no agent can take the message: `null` on a rule = the router's default (R-B10). */
export type FallbackAction = 'notify_admin' | 'queue_task' | 'reject';
export type RulePriority = 'HIGH' | 'NORMAL' | 'LOW';

export const DISPATCHES: readonly Dispatch[] = ['random', 'sticky', 'weighted', 'broadcast'];
export const FALLBACK_ACTIONS: readonly FallbackAction[] = ['notify_admin', 'queue_task', 'reject'];
export const RULE_PRIORITIES: readonly RulePriority[] = ['HIGH', 'NORMAL', 'LOW'];
/** Envelope fields a sticky rule may pin on; `headers.<name>` pins on one header as well. */
export const STICKY_FIELDS = ['session_id', 'correlation_id', 'producer', 'trace_id', 'request_id', 'idempotency_key'] as const;

/** 1-based, as editors and compilers print them. */
export interface SourcePosition {
  file: string;
  line: number;
  column: number;
}

/** A condition on one string field: exact value, prefix, or any of several exact values. */
export type StringMatch = { exact: string } | { prefix: string } | { any_of: readonly string[] };

export interface RuleWhen {
  message_type?: StringMatch;
  /** matches the message's capability NAME (without @major) or its topic */
  target_role?: StringMatch;
  /** matches if ANY of the producer's roles matches (its capability names and its agent type) */
  source_role?: StringMatch;
  /** all must be present in the message's tags */
  custom_tags?: readonly string[];
}

export interface RuleAction {
  dispatch: Dispatch;
  sticky_by?: string;
  priority?: RulePriority;
  timeout_ms?: number;
}

export interface Rule {
  name: string;
  /** position in the file, 0-based: the first matching rule wins */
  index: number;
  when: RuleWhen;
  action: RuleAction;
  fallback: FallbackAction | null;
  at: SourcePosition;
}

/** What a rule looks at in a message, resolved by the router from the envelope and the registry. */
export interface RuleInput {
  message_type: string;
  target_role: string | null;
  source_roles: readonly string[];
  tags: readonly string[];
}

export interface RuleSet {
  readonly rules: readonly Rule[];
  /** sha256 (hex) of the source the rules were parsed from */
  readonly digest: string;
  /** The first rule, in file order, whose `when` holds for the input; null when none does. */
  match(input: RuleInput): Rule | null;
}

export interface Diagnostic {
  severity: 'error' | 'warning';
  at: SourcePosition;
  message: string;
  /** the rule the diagnostic is about, when it is about one */
  rule?: string;
}

export interface ParseResult {
  /** null iff any diagnostic is an error */
  rules: RuleSet | null;
  diagnostics: Diagnostic[];
}
