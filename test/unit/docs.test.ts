import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

// The README's config reference and error table are generated from packages/core; this fails
// when someone changes an option or a code without regenerating them (node scripts/gen-docs.mjs).
describe('generated docs', () => {
  it('README config and error tables match the code', () => {
    expect(() => execFileSync(process.execPath, ['scripts/gen-docs.mjs', '--check'], { stdio: 'pipe' })).not.toThrow();
  });
});
