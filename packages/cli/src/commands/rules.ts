import { benchRules, formatDiagnostic, loadRulesFile } from '@reach/rules';
import { readFile } from 'node:fs/promises';
import { adminCall, adminFailure } from '../admin-api.js';
import { printJson, usageError } from '../api.js';
import { table } from '../output.js';
import { parseSubcommand } from '../subcommand.js';

/**
 * `reach rules check|explain|bench …` (docs/design.md §5): the ReachRule file checked offline
 * (docs/rules.md), and a routing decision explained by the running router.
 */
export const RULES_USAGE = `  reach rules check <file> [--json]    validate a rules file: every problem as file:line:column (exit 1 on errors)
  reach rules explain <message.json> [--json]
                          which rule, which candidates and scores, which choice — a dry run
                          against the running router's live registry view (changes nothing)
  reach rules bench [--json]           compiled rule matcher vs a first-match scan, 10 to 10,000 rules`;

export async function rulesCommand(argv: string[]): Promise<number> {
  const parsed = parseSubcommand(argv, {}, RULES_USAGE);
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  const [sub, file] = positionals;
  switch (sub) {
    case 'check':
      if (file === undefined) return usageError(`reach rules check needs a file\n\n${RULES_USAGE}`);
      return check(file, values.json);
    case 'explain':
      if (file === undefined) return usageError(`reach rules explain needs a message file (JSON, the fields of POST /v1/messages)\n\n${RULES_USAGE}`);
      return explain(file, values.json);
    case 'bench':
      return bench(values.json);
    default:
      return usageError(`unknown rules command ${sub}\n\n${RULES_USAGE}`);
  }
}

/** Diagnostics go to stderr like a compiler's; the verdict (or the JSON report) to stdout. */
async function check(file: string, json: boolean): Promise<number> {
  const { rules, diagnostics } = await loadRulesFile(file);
  const errors = diagnostics.filter((d) => d.severity === 'error').length;
  const warnings = diagnostics.length - errors;
  if (json) {
    printJson({ ok: rules !== null, file, rules: rules?.rules.map((r) => r.name) ?? [], digest: rules?.digest ?? null, diagnostics });
    return rules ? 0 : 1;
  }
  for (const d of diagnostics) process.stderr.write(formatDiagnostic(d) + '\n');
  if (!rules) {
    process.stderr.write(`✘ ${file}: ${plural(errors, 'error')}${warnings ? `, ${plural(warnings, 'warning')}` : ''}\n`);
    return 1;
  }
  process.stdout.write(`✔ ${file}: ${plural(rules.rules.length, 'rule')}${warnings ? ` (${plural(warnings, 'warning')})` : ''}\n`);
  return 0;
}

interface Candidate {
  agent_id: string;
  score: number;
  load_rate: number;
  health: number;
  priority: number;
  locality: number;
  saturated?: true;
}

interface Explanation {
  rule: { name: string; at: { file: string; line: number; column: number }; action: Record<string, unknown>; fallback: string | null } | null;
  facts: { message_type: string; target_role: string | null; source_roles: string[]; tags: string[] };
  routed_as: { priority: string; timeout_ms: number | null };
  decision: {
    kind: string;
    agentId?: string;
    agentIds?: string[];
    why?: string;
    trace?: { strategy?: string; candidates?: Candidate[]; candidates_total?: number; rejected?: Record<string, number>; sticky?: unknown };
  };
}

async function explain(file: string, json: boolean): Promise<number> {
  let message: unknown;
  try {
    message = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    return usageError(`${file}: ${(err as Error).message}`);
  }
  let x: Explanation;
  try {
    x = await adminCall<Explanation>('router', 'POST', '/v1/rules/explain', message);
  } catch (err) {
    return adminFailure(err, json);
  }
  if (json) {
    printJson(x);
    return 0;
  }
  const out = process.stdout;
  const f = x.facts;
  out.write(`message    type=${f.message_type} target_role=${f.target_role ?? '-'} source_roles=[${f.source_roles.join(', ')}] tags=[${f.tags.join(', ')}]\n`);
  out.write(
    x.rule
      ? `rule       ${x.rule.name} (${x.rule.at.file}:${x.rule.at.line}:${x.rule.at.column}) dispatch=${String(x.rule.action.dispatch)}${x.rule.fallback ? ` fallback=${x.rule.fallback}` : ''}\n`
      : 'rule       none matched: default policy (weighted, session-sticky)\n',
  );
  out.write(`routed as  priority=${x.routed_as.priority} timeout_ms=${x.routed_as.timeout_ms ?? 'default'}\n`);
  const d = x.decision;
  const trace = d.trace ?? {};
  const chosen = d.agentId ?? (d.agentIds ? d.agentIds.join(', ') : '-');
  out.write(`decision   ${d.kind}${trace.strategy ? ` (${trace.strategy})` : ''} → ${chosen}${d.why ? ` — ${d.why}` : ''}\n`);
  if (trace.rejected && Object.keys(trace.rejected).length > 0) {
    out.write(
      `not candidates: ${Object.entries(trace.rejected)
        .map(([why, n]) => `${why}=${n}`)
        .join(' ')}\n`,
    );
  }
  if (trace.candidates && trace.candidates.length > 0) {
    out.write(`candidates (${trace.candidates_total ?? trace.candidates.length}):\n`);
    out.write(
      table(
        trace.candidates.map((c) => ({
          agent_id: c.agent_id,
          score: c.score,
          load_rate: c.load_rate,
          health: c.health,
          priority: c.priority,
          locality: c.locality,
          chosen: c.agent_id === d.agentId || d.agentIds?.includes(c.agent_id) ? '✔' : c.saturated ? 'saturated' : '',
        })),
      ),
    );
  }
  return 0;
}

function bench(json: boolean): number {
  const rows = benchRules();
  if (json) printJson(rows);
  else process.stdout.write(table(rows.map((r) => ({ ...r, speedup: `${r.speedup}x`, matched: `${Math.round(r.matched * 100)}%` }))));
  return 0;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}
