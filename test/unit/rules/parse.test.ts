import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EMPTY_RULES, formatDiagnostic, loadRulesFile, parseRules, RULES_JSON_SCHEMA } from '@reach/rules';
import { input } from './fixtures.js';

const SOURCE = `version: 1
rules:
  - name: review.v2
    when:
      message_type: task_request
      target_role: {prefix: "retriever."}
      source_role: [planner, router]
      custom_tags: needs_review
    action:
      dispatch: sticky
      sticky_by: session_id
      priority: high
      timeout_ms: 30000
    fallback:
      if_no_available_agent: notify_admin
  - name: explicit_forms
    when: {message_type: {exact: a}, target_role: {any_of: [x, y]}, custom_tags: [t1, t2]}
    action: {dispatch: broadcast}
  - name: everything_else
    when: {}
    action: {dispatch: weighted, priority: Low}
    fallback: {if_no_available_agent: queue_task}
`;

describe('parseRules', () => {
  const { rules, diagnostics } = parseRules(SOURCE, 'deploy/rules.yaml');

  it('normalises every way of writing a condition and an action', () => {
    expect(diagnostics).toEqual([]);
    expect(rules!.rules).toEqual([
      {
        name: 'review.v2',
        index: 0,
        when: {
          message_type: { exact: 'task_request' },
          target_role: { prefix: 'retriever.' },
          source_role: { any_of: ['planner', 'router'] },
          custom_tags: ['needs_review'],
        },
        action: { dispatch: 'sticky', sticky_by: 'session_id', priority: 'HIGH', timeout_ms: 30_000 },
        fallback: 'notify_admin',
        at: { file: 'deploy/rules.yaml', line: 3, column: 5 },
      },
      {
        name: 'explicit_forms',
        index: 1,
        when: { message_type: { exact: 'a' }, target_role: { any_of: ['x', 'y'] }, custom_tags: ['t1', 't2'] },
        action: { dispatch: 'broadcast' },
        fallback: null,
        at: { file: 'deploy/rules.yaml', line: 16, column: 5 },
      },
      {
        name: 'everything_else',
        index: 2,
        when: {},
        action: { dispatch: 'weighted', priority: 'LOW' },
        fallback: 'queue_task',
        at: { file: 'deploy/rules.yaml', line: 19, column: 5 },
      },
    ]);
  });

  it('digests the source with sha256', () => {
    expect(rules!.digest).toBe(createHash('sha256').update(SOURCE).digest('hex'));
  });

  it('matches first rule first, in file order', () => {
    const review = input({ message_type: 'task_request', target_role: 'retriever.web', source_roles: ['writer', 'router'], tags: ['needs_review', 'x'] });
    expect(rules!.match(review)?.name).toBe('review.v2');
    expect(rules!.match({ ...review, tags: [] })?.name).toBe('everything_else');
    expect(rules!.match(input({ message_type: 'a', target_role: 'y', tags: ['t2', 't1'] }))?.name).toBe('explicit_forms');
    expect(rules!.match(input({ message_type: 'a', target_role: 'y', tags: ['t1'] }))?.name).toBe('everything_else');
  });

  it('accepts an empty list, with a warning, as no rules', () => {
    const empty = parseRules('rules: []\n', 'r.yaml');
    expect(empty.rules!.rules).toEqual([]);
    expect(empty.rules!.match(input())).toBeNull();
    expect(empty.diagnostics.map(formatDiagnostic)).toEqual(['r.yaml:1:8: warning: no rules: every message gets the default routing']);
  });

  it('resolves YAML anchors and aliases, and still points into the file', () => {
    const src =
      'rules:\n  - name: a\n    when: &w {message_type: x}\n    action: {dispatch: random}\n  - name: b\n    when: *w\n    action: {dispatch: random}\n';
    expect(parseRules(src, 'r.yaml').diagnostics.map(formatDiagnostic)).toEqual([
      'r.yaml:5:5: error: rule "b" is unreachable: rule "a" (line 2) already matches every message it matches (first match wins)',
    ]);
  });

  it('refuses an alias bomb instead of expanding it', () => {
    const lines = ['a0: &a0 [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 1; i < 8; i++)
      lines.push(
        `a${i}: &a${i} [${Array(10)
          .fill(`*a${i - 1}`)
          .join(', ')}]`,
      );
    lines.push('rules: []');
    const { rules: none, diagnostics: out } = parseRules(lines.join('\n'), 'bomb.yaml');
    expect(none).toBeNull();
    expect(out[0]!.message).toMatch(/^invalid YAML: .*alias/i);
  });
});

describe('EMPTY_RULES', () => {
  it('matches nothing and has the digest of an empty source', () => {
    expect(EMPTY_RULES.rules).toEqual([]);
    expect(EMPTY_RULES.match(input())).toBeNull();
    expect(EMPTY_RULES.digest).toBe(createHash('sha256').update('').digest('hex'));
  });
});

describe('loadRulesFile', () => {
  it('loads the shipped example without any diagnostic', async () => {
    const { rules, diagnostics } = await loadRulesFile(join(process.cwd(), 'deploy', 'rules.yaml'));
    expect(diagnostics).toEqual([]);
    expect(rules!.rules.map((r) => r.name)).toEqual(['fallback_to_human_review', 'route_to_retriever', 'route_to_aggregator']);
  });

  it('reports a missing file as a diagnostic', async () => {
    const { rules, diagnostics } = await loadRulesFile('/nonexistent/rules.yaml');
    expect(rules).toBeNull();
    expect(diagnostics.map(formatDiagnostic)).toEqual(['/nonexistent/rules.yaml:1:1: error: cannot read the rules file (ENOENT)']);
  });
});

describe('RULES_JSON_SCHEMA', () => {
  it('is a plain JSON document (editors can use it for completion)', () => {
    expect(JSON.parse(JSON.stringify(RULES_JSON_SCHEMA))).toEqual(RULES_JSON_SCHEMA);
    expect(RULES_JSON_SCHEMA.required).toEqual(['rules']);
  });
});
