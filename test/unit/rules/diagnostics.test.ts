import { describe, expect, it } from 'vitest';
import { parseRules } from '@reach/rules';
import { check } from './fixtures.js';

// Every kind of diagnostic, each at the exact line:column of the node it is about.

const ok = (body: string) => `rules:\n${body}`;

describe('YAML syntax', () => {
  it('reports a syntax error with its position and nothing else', () => {
    const src = ['rules:', '  - name: a', '    when: {message_type: x', '    action: {dispatch: random}'].join('\n');
    expect(check(src)).toEqual(['rules.yaml:4:5: error: invalid YAML: Flow map in block collection must be sufficiently indented and end with a }']);
    expect(parseRules(src, 'rules.yaml').rules).toBeNull();
    expect(check('rules:\n  - name: "a\n    when: {}\n')).toEqual(['rules.yaml:4:1: error: invalid YAML: Missing closing "quote']);
  });

  it('reports a tab used for indentation at its line and column', () => {
    expect(check('rules:\n\t- name: a\n')).toEqual(['rules.yaml:2:1: error: invalid YAML: Tabs are not allowed as indentation']);
  });

  it('reports a key written twice in one mapping', () => {
    const src = ok(['  - name: a', '    name: b', '    when: {}', '    action: {dispatch: random}'].join('\n'));
    expect(check(src)).toEqual(['rules.yaml:3:5: error: invalid YAML: Map keys must be unique']);
  });
});

describe('schema', () => {
  it('names the rule, the field, the allowed values and what was written (the bad-enum example)', () => {
    const src = [
      'version: 1', //  1
      'rules:', //      2
      '  - name: route_to_review', // 3
      '    when: {message_type: task_request, custom_tags: [needs_review]}', // 4
      '    action: {dispatch: random}', // 5
      '', // 6
      '  # the general rule', // 7
      '  - name: route_to_retriever', // 8
      '    when:', // 9
      '      message_type: task_request', // 10
      '      target_role: retriever', // 11
      '', // 12
      '    action:', // 13
      '      dispatch:     rnadom', // 14: the value starts at column 21
    ].join('\n');
    expect(check(src)).toEqual([
      'rules.yaml:14:21: error: rule "route_to_retriever": action.dispatch must be one of random, sticky, weighted, broadcast (got "rnadom")',
    ]);
  });

  it('reports an unknown field at its key, with the field it most likely meant', () => {
    const src = ok(['  - name: a', '    when:', '      target_roles: retriever', '    action: {dispatch: random, prioriti: high}'].join('\n'));
    expect(check(src)).toEqual([
      'rules.yaml:4:7: error: rule "a": unknown field "when.target_roles" (did you mean "target_role"?)',
      'rules.yaml:5:32: error: rule "a": unknown field "action.prioriti" (did you mean "priority"?)',
    ]);
  });

  it('reports unknown fields at the top level and in a rule', () => {
    const src = ['rulez: []', 'rules:', '  - name: a', '    when: {}', '    action: {dispatch: random}', '    fallbak: {if_no_available_agent: reject}'].join(
      '\n',
    );
    expect(check(src)).toEqual([
      'rules.yaml:1:1: error: unknown field "rulez" (did you mean "rules"?)',
      'rules.yaml:6:5: error: rule "a": unknown field "fallbak" (did you mean "fallback"?)',
    ]);
  });

  it('lists the known fields when a name is nothing like them', () => {
    expect(check(ok('  - name: a\n    when: {colour: red}\n    action: {dispatch: random}'))).toEqual([
      'rules.yaml:3:12: error: rule "a": unknown field "when.colour" (expected one of message_type, target_role, source_role, custom_tags)',
    ]);
  });

  it('reports missing required fields at the mapping that lacks them', () => {
    expect(check('version: 1\n')).toEqual(['rules.yaml:1:1: error: missing required top-level field "rules"']);
    expect(check(ok('  - name: a\n    action: {dispatch: random}'))).toEqual(['rules.yaml:2:5: error: rule "a" is missing required field "when"']);
    expect(check(ok('  - when: {}\n    action: {dispatch: random}'))).toEqual(['rules.yaml:2:5: error: rule #1 is missing required field "name"']);
    expect(check(ok('  - name: a\n    when: {}\n    action:\n      priority: high'))).toEqual([
      'rules.yaml:5:7: error: rule "a": action is missing required field "dispatch"',
    ]);
    expect(check(ok('  - name: a\n    when: {}\n    action: {dispatch: random}\n    fallback: {}'))).toEqual([
      'rules.yaml:5:15: error: rule "a": fallback is missing required field "if_no_available_agent"',
    ]);
  });

  it('reports wrong types, and an empty value at its key', () => {
    const src = ok(
      [
        '  - name: a', // 2
        '    when:', // 3: nothing after the key
        '    action: {dispatch: random}', // 4
        '  - name: b', // 5
        '    when: {message_type: 5, custom_tags: {x: 1}}', // 6
        '    action: random', // 7
        '  - just a string', // 8
      ].join('\n'),
    );
    expect(check(src)).toEqual([
      'rules.yaml:3:5: error: rule "a": when must be a mapping of conditions (`when: {}` matches every message) (got nothing)',
      'rules.yaml:6:26: error: rule "b": when.message_type must be a string, a list of strings, or {prefix: …} (got 5)',
      'rules.yaml:6:42: error: rule "b": when.custom_tags must be a tag or a list of tags (got a mapping)',
      'rules.yaml:7:13: error: rule "b": action must be a mapping with dispatch and optionally sticky_by, priority, timeout_ms (got "random")',
      'rules.yaml:8:5: error: rule #3 must be a mapping with name, when, action and optionally fallback (got "just a string")',
    ]);
  });

  it('reports a file that is not a mapping with a rules list', () => {
    expect(check('')).toEqual(['rules.yaml:1:1: error: the file must be a mapping with a `rules:` list (got nothing)']);
    expect(check('- a\n')).toEqual(['rules.yaml:1:1: error: the file must be a mapping with a `rules:` list (got a list)']);
    expect(check('rules: {a: 1}\n')).toEqual(['rules.yaml:1:8: error: rules must be a list of rules (got a mapping)']);
    expect(check('version: 2\nrules: []\n')).toEqual([
      'rules.yaml:1:10: error: version must be 1 (got 2)',
      'rules.yaml:2:8: warning: no rules: every message gets the default routing',
    ]);
  });

  it('reports bad enums, patterns and ranges', () => {
    const src = ok(
      [
        '  - name: Route To Retriever', // 2
        '    when: {message_type: {prefix: ""}, target_role: [], source_role: {prefix: a, exact: b}}', // 3
        '    action: {dispatch: sticky, sticky_by: sequence_id, priority: urgent, timeout_ms: 0}', // 4
        '    fallback: {if_no_available_agent: page_someone}', // 5
        '  - name: b', // 6
        '    when: {}', // 7
        '    action: {dispatch: random, timeout_ms: 1.5}', // 8
      ].join('\n'),
    );
    expect(check(src)).toEqual([
      'rules.yaml:2:11: error: rule "Route To Retriever": name must be made of a-z, 0-9, "_", "." and "-" (got "Route To Retriever")',
      'rules.yaml:3:35: error: rule "Route To Retriever": when.message_type.prefix must not be empty',
      'rules.yaml:3:53: error: rule "Route To Retriever": when.target_role must not be an empty list',
      'rules.yaml:3:70: error: rule "Route To Retriever": when.source_role must have exactly one key, one of exact, prefix, any_of',
      'rules.yaml:4:43: error: rule "Route To Retriever": action.sticky_by must be one of session_id, correlation_id, producer, trace_id, request_id, idempotency_key or headers.<name> (got "sequence_id")',
      'rules.yaml:4:66: error: rule "Route To Retriever": action.priority must be one of high, normal, low (got "urgent")',
      'rules.yaml:4:86: error: rule "Route To Retriever": action.timeout_ms must be an integer from 1 to 3600000 (got 0)',
      'rules.yaml:5:39: error: rule "Route To Retriever": fallback.if_no_available_agent must be one of notify_admin, queue_task, reject (got "page_someone")',
      'rules.yaml:8:44: error: rule "b": action.timeout_ms must be an integer from 1 to 3600000 (got 1.5)',
    ]);
  });

  it('accepts sticky_by on a header and priority in any case', () => {
    const result = parseRules(
      ok('  - name: a\n    when: {}\n    action: {dispatch: sticky, sticky_by: headers.x-tenant, priority: LoW, timeout_ms: 3600000}'),
      'f',
    );
    expect(result.diagnostics).toEqual([]);
    expect(result.rules!.rules[0]!.action).toEqual({ dispatch: 'sticky', sticky_by: 'headers.x-tenant', priority: 'LOW', timeout_ms: 3_600_000 });
  });
});

describe('semantic checks', () => {
  it('reports a duplicate name at the second one, naming the first line', () => {
    const src = ok(
      [
        '  - name: a',
        '    when: {message_type: x}',
        '    action: {dispatch: random}',
        '  - name:  a',
        '    when: {message_type: y}',
        '    action: {dispatch: random}',
      ].join('\n'),
    );
    expect(check(src)).toEqual(['rules.yaml:5:12: error: duplicate rule name "a" (first defined at line 2)']);
  });

  it('requires sticky_by for sticky dispatch', () => {
    expect(check(ok('  - name: a\n    when: {}\n    action:\n      dispatch: sticky'))).toEqual([
      'rules.yaml:5:17: error: rule "a": action.sticky_by is required when dispatch is sticky (one of session_id, correlation_id, producer, trace_id, request_id, idempotency_key or headers.<name>)',
    ]);
  });

  it('warns about sticky_by on another dispatch, and about repeated values; warnings keep the rules', () => {
    const src = ok(
      [
        '  - name: a', // 2
        '    when: {message_type: [x, y, x], custom_tags: [t, t]}', // 3
        '    action: {dispatch: broadcast, sticky_by: session_id}', // 4
      ].join('\n'),
    );
    const result = parseRules(src, 'rules.yaml');
    expect(result.rules?.rules.map((r) => r.name)).toEqual(['a']);
    expect(check(src)).toEqual([
      'rules.yaml:3:26: warning: rule "a": when.message_type lists a value more than once',
      'rules.yaml:3:50: warning: rule "a": when.custom_tags lists a tag more than once',
      'rules.yaml:4:46: warning: rule "a": action.sticky_by is ignored: only dispatch sticky uses it (dispatch is broadcast)',
    ]);
  });

  it('reports a rule shadowed by one earlier rule, naming it and its line', () => {
    const src = ok(
      [
        '  - name: all_tasks', // 2
        '    when: {message_type: {prefix: task.}}', // 3
        '    action: {dispatch: random}', // 4
        '  - name: one_task', // 5
        '    when: {message_type: task.search, custom_tags: [urgent]}', // 6
        '    action: {dispatch: random, priority: high}', // 7
      ].join('\n'),
    );
    expect(check(src)).toEqual([
      'rules.yaml:5:5: error: rule "one_task" is unreachable: rule "all_tasks" (line 2) already matches every message it matches (first match wins)',
    ]);
  });

  it('reports a rule shadowed by several earlier rules together', () => {
    const src = ok(
      [
        '  - name: search', // 2
        '    when: {message_type: search}', // 3
        '    action: {dispatch: random}', // 4
        '  - name: fetches', // 5
        '    when: {message_type: {prefix: fetch.}}', // 6
        '    action: {dispatch: random}', // 7
        '  - name: both', // 8
        '    when: {message_type: [search, fetch.page]}', // 9
        '    action: {dispatch: broadcast}', // 10
      ].join('\n'),
    );
    expect(check(src)).toEqual([
      'rules.yaml:8:5: error: rule "both" is unreachable: rules "search" (line 2), "fetches" (line 5) together already match every message it matches (first match wins)',
    ]);
  });

  it('makes every rule after a catch-all unreachable', () => {
    const src = ok(
      [
        '  - name: everything',
        '    when: {}',
        '    action: {dispatch: random}',
        '  - name: late',
        '    when: {message_type: x}',
        '    action: {dispatch: random}',
      ].join('\n'),
    );
    expect(check(src)).toEqual([
      'rules.yaml:5:5: error: rule "late" is unreachable: rule "everything" (line 2) has an empty when: it matches every message (first match wins)',
    ]);
  });

  it('does not report a narrower rule placed before a wider one', () => {
    const src = ok(
      [
        '  - name: narrow',
        '    when: {message_type: x, custom_tags: [t]}',
        '    action: {dispatch: random}',
        '  - name: wide',
        '    when: {message_type: x}',
        '    action: {dispatch: random}',
      ].join('\n'),
    );
    expect(check(src)).toEqual([]);
  });

  it('still checks the rules against each other when another rule has a schema error', () => {
    const src = ok(
      [
        '  - name: a', // 2
        '    when: {message_type: x}', // 3
        '    action: {dispatch: random}', // 4
        '  - name: broken', // 5
        '    when: {message_type: y}', // 6
        '    action: {dispatch: nope}', // 7
        '  - name: a', // 8
        '    when: {message_type: x}', // 9
        '    action: {dispatch: random}', // 10
      ].join('\n'),
    );
    expect(check(src)).toEqual([
      'rules.yaml:7:24: error: rule "broken": action.dispatch must be one of random, sticky, weighted, broadcast (got "nope")',
      'rules.yaml:8:5: error: rule "a" is unreachable: rule "a" (line 2) already matches every message it matches (first match wins)',
      'rules.yaml:8:11: error: duplicate rule name "a" (first defined at line 2)',
    ]);
  });
});
