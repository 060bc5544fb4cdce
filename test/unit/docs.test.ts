import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

// docs/configuration.md, the README's error table and its CLI section are generated from code
// (packages/core's option catalog and error table, packages/sdk's variables, `reach --help`);
// this fails when someone changes one of them without regenerating (node scripts/gen-docs.mjs).
describe('generated docs', () => {
  it('docs/configuration.md, the README error table and the README CLI section match the code', () => {
    expect(() => execFileSync(process.execPath, ['scripts/gen-docs.mjs', '--check'], { stdio: 'pipe' })).not.toThrow();
  });
});
