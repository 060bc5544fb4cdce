import { describe, expect, it } from 'vitest';
import { table, toJson } from '../../../packages/bench/src/report.js';

describe('bench output', () => {
  it('writes JSON the way the repository formats it: arrays of plain values on one line', () => {
    const value = { rates: [50, 250, 1000], reasons: ['p99 "high"', 'lag'], nested: { empty: [], rows: [{ a: 1 }], n: null } };
    const text = toJson(value);
    expect(text).toContain('"rates": [50, 250, 1000]');
    expect(text).toContain('"reasons": ["p99 \\"high\\"", "lag"]');
    expect(text).toContain('"rows": [\n');
    expect(JSON.parse(text)).toEqual(value);
    const long = { ids: Array.from({ length: 40 }, (_, i) => `message-${i}`) };
    expect(toJson(long).split('\n').length).toBeGreaterThan(40);
  });

  it('prints tables with columns as wide as their widest cell', () => {
    expect(
      table([
        { a: 1, bb: 'x' },
        { a: 'long', bb: 2 },
      ]),
    ).toBe('a     bb\n1     x\nlong  2\n');
    expect(table([])).toBe('(none)\n');
  });
});
