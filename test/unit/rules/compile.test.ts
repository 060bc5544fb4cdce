import { describe, expect, it } from 'vitest';
import { benchRules, compileRules, matchingRules, naiveMatch } from '@reach/rules';
import { input, rules } from './fixtures.js';

// The compiled matcher on hand-picked cases; properties.test.ts compares it with the plain
// scan on random rules. Lists are longer than a handful so the indexes are used.
const filler = Array.from({ length: 20 }, (_, i) => ({ message_type: { exact: `filler_${i}` } }));

describe('compiled matcher', () => {
  it('picks the earliest matching rule whatever index finds it', () => {
    const list = rules(
      ...filler,
      { message_type: { prefix: 'task.' }, custom_tags: ['urgent'] }, // r20
      { target_role: { exact: 'retriever' } }, // r21
      { message_type: { any_of: ['task.search', 'task.fetch'] } }, // r22
      { message_type: { prefix: 'task.se' } }, // r23
      { source_role: { prefix: 'data.' } }, // r24
      {}, // r25
    );
    const set = compileRules(list);
    const name = (o: Parameters<typeof input>[0]) => set.match(input(o))?.name;
    expect(name({ message_type: 'task.search', tags: ['urgent'] })).toBe('r20');
    expect(name({ message_type: 'task.search', target_role: 'retriever' })).toBe('r21');
    expect(name({ message_type: 'task.search' })).toBe('r22');
    expect(name({ message_type: 'task.send' })).toBe('r23');
    expect(name({ message_type: 'other', source_roles: ['planner', 'data.retriever'] })).toBe('r24');
    expect(name({ message_type: 'other' })).toBe('r25');
    expect(name({ message_type: 'filler_7', target_role: 'retriever' })).toBe('r7');
  });

  it('needs a target for a target condition and a role for a source condition', () => {
    const list = rules(...filler, { target_role: { prefix: 'r' } }, { source_role: { exact: 'x' } });
    const set = compileRules(list);
    expect(set.match(input({ target_role: null }))).toBeNull();
    expect(set.match(input({ target_role: 'retriever' }))?.name).toBe('r20');
    expect(set.match(input({ source_roles: [] }))).toBeNull();
    expect(set.match(input({ source_roles: ['y', 'x'] }))?.name).toBe('r21');
  });

  it('requires every tag of a rule, in any order, among others', () => {
    const set = compileRules(rules(...filler, { custom_tags: ['a', 'b', 'c'] }, { custom_tags: ['c'] }));
    expect(set.match(input({ tags: ['c', 'x', 'b', 'a'] }))?.name).toBe('r20');
    expect(set.match(input({ tags: ['a', 'c'] }))?.name).toBe('r21');
    expect(set.match(input({ tags: ['a', 'b'] }))).toBeNull();
  });

  it('lists every matching rule for an explanation, the applied one first', () => {
    const list = rules(...filler, { message_type: { exact: 'task' } }, {});
    expect(matchingRules(list, input()).map((r) => r.name)).toEqual(['r20', 'r21']);
    expect(naiveMatch(list, input())?.name).toBe('r20');
  });
});

describe('rules micro-benchmark', () => {
  it('produces a row per size with both matchers agreeing (numbers are printed by reach rules bench, not asserted)', () => {
    const rows = benchRules({ sizes: [10, 50], lookups: 200 });
    expect(rows.map((r) => r.rules)).toEqual([10, 50]);
    for (const row of rows) expect(row.matched).toBeGreaterThan(0.5);
  });
});
