import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseRules } from '@reach/rules';
import { check } from './fixtures.js';

// The three example rules of the original design notes (R-B11), verbatim. Two things are wrong with them, and the
// checker says so at the right lines: `sequence_id` is no envelope field to stick on, and the
// third rule has exactly the `when` of the first, so the first always wins and it never applies.
const DESIGN_NOTES = `rules:
  - name: route_to_retriever
    when:
      message_type: task_request
      target_role: retriever
    action:
      dispatch: random
      priority: high
  - name: route_to_aggregator
    when:
      message_type: task_result
      source_role: retriever
    action:
      dispatch: sticky
      sticky_by: sequence_id
  - name: fallback_to_human_review
    when:
      message_type: task_request
      target_role: retriever
    action:
      dispatch: random
      priority: normal
    fallback:
      if_no_available_agent: notify_admin
`;

describe('the design notes example', () => {
  it('reports the unknown sticky field and the shadowed third rule', () => {
    expect(check(DESIGN_NOTES)).toEqual([
      'rules.yaml:15:18: error: rule "route_to_aggregator": action.sticky_by must be one of session_id, correlation_id, producer, trace_id, request_id, idempotency_key or headers.<name> (got "sequence_id")',
      'rules.yaml:16:5: error: rule "fallback_to_human_review" is unreachable: rule "route_to_retriever" (line 2) already matches every message it matches (first match wins)',
    ]);
    expect(parseRules(DESIGN_NOTES, 'rules.yaml').rules).toBeNull();
  });

  it('still reports the shadowed rule once the sticky field is fixed', () => {
    expect(check(DESIGN_NOTES.replace('sequence_id', 'session_id'))).toEqual([
      'rules.yaml:16:5: error: rule "fallback_to_human_review" is unreachable: rule "route_to_retriever" (line 2) already matches every message it matches (first match wins)',
    ]);
  });

  it('ships adapted in deploy/rules.yaml, every rule reachable and applied as intended', () => {
    const { rules, diagnostics } = parseRules(readFileSync(join(process.cwd(), 'deploy', 'rules.yaml'), 'utf8'), 'deploy/rules.yaml');
    expect(diagnostics).toEqual([]);
    const request = { message_type: 'task_request', target_role: 'retriever', source_roles: ['planner'], tags: [] as string[] };
    expect(rules!.match(request)).toMatchObject({ name: 'route_to_retriever', action: { dispatch: 'random', priority: 'HIGH' }, fallback: null });
    expect(rules!.match({ ...request, tags: ['needs_review'] })).toMatchObject({
      name: 'fallback_to_human_review',
      action: { priority: 'NORMAL' },
      fallback: 'notify_admin',
    });
    const result = { message_type: 'task_result', target_role: 'aggregator', source_roles: ['retriever', 'data.retriever'], tags: [] };
    expect(rules!.match(result)).toMatchObject({ name: 'route_to_aggregator', action: { dispatch: 'sticky', sticky_by: 'session_id' } });
    expect(rules!.match({ ...result, source_roles: ['planner'] })).toBeNull();
  });
});
