import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// The README is the front door: what a newcomer needs first, and links to the rest. History
// (dated runs, incidents, every measurement) belongs in docs/benchmarks.md and docs/faults.md.
const readme = readFileSync('README.md', 'utf8');
const sections = [...readme.matchAll(/^## (.+)$/gm)].map((m) => m[1]!);

describe('README.md', () => {
  it('stays short: at most 400 lines', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(400);
  });

  it('has the sections a newcomer looks for, in order', () => {
    const wanted = [
      'The two commands',
      'Architecture',
      'Writing an agent',
      'CLI',
      'Web console',
      'Performance',
      'Fault injection',
      'Storage and retention',
      'Configuration',
      'Error codes',
      'Troubleshooting',
      'What is not built yet',
    ];
    const found = wanted.map((w) => sections.findIndex((s) => s === w || s.startsWith(`${w}:`)));
    expect(Object.fromEntries(wanted.map((w, i) => [w, found[i]! >= 0]))).toEqual(Object.fromEntries(wanted.map((w) => [w, true])));
    expect(found).toEqual([...found].sort((a, b) => a - b));
  });

  it('names no commit (a hash means history, which lives in docs/)', () => {
    const hashes = [...readme.matchAll(/\b[0-9a-f]{7,40}\b/g)].map((m) => m[0]).filter((h) => /[a-f]/.test(h) && /\d/.test(h));
    expect(hashes).toEqual([]);
  });

  it('links the design and the requirements', () => {
    expect(readme).toContain('(docs/design.md)');
    expect(readme).toContain('(docs/requirements.md)');
    expect(readme).toContain('(docs/configuration.md)');
  });
});
