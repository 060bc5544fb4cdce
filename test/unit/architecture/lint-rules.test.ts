import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ESLint } from 'eslint';
import { afterAll, beforeAll, expect, it } from 'vitest';

// The lint rules that enforce the architecture (eslint.config.js) must be able to fail: each
// is shown a planted violation inside a package's sources. The cycle check once passed an
// a → b → a cycle, because './b.js' did not resolve to b.ts and it saw no edges at all.
const root = join(import.meta.dirname, '..', '..', '..');
const dir = join(root, 'packages', 'core', 'src', `lint-fixture-${process.pid}`);
const files: Record<string, string> = {
  'cycle-a.ts': "import { b } from './cycle-b.js';\nexport const a = (): number => b() + 1;\n",
  'cycle-b.ts': "import { a } from './cycle-a.js';\nexport const b = (): number => (Math.random() > 2 ? a() : 0);\n",
  'floating.ts': 'export async function later(): Promise<void> {}\nexport function now(): void {\n  later();\n}\n',
  'service-import.ts': "export { main } from '@reach/dispatcher';\n",
  'clean.ts': "import { a } from './cycle-a.js';\nexport const c = (): number => 2;\nexport const d = a;\n",
  'process-env.ts': 'export const level = (): string | undefined => process.env.REACH_LOG_LEVEL;\n',
};
let results: ESLint.LintResult[];

beforeAll(async () => {
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  results = await new ESLint({ cwd: root }).lintFiles([dir]);
}, 120_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function rulesOf(name: string): string[] {
  const result = results.find((r) => r.filePath === join(dir, name));
  return [...new Set(result?.messages.map((m) => m.ruleId ?? m.message) ?? ['(not linted)'])].sort();
}

it('finds an import cycle within a package, in both files', () => {
  expect(rulesOf('cycle-a.ts')).toContain('import-x/no-cycle');
  expect(rulesOf('cycle-b.ts')).toContain('import-x/no-cycle');
});

it('finds a floating promise', () => {
  expect(rulesOf('floating.ts')).toEqual(['@typescript-eslint/no-floating-promises']);
});

it('refuses a package or service importing a service', () => {
  expect(rulesOf('service-import.ts')).toContain('no-restricted-imports');
});

it('passes a file that only imports into a cycle without being part of it', () => {
  expect(rulesOf('clean.ts')).toEqual([]);
});

it('refuses process.env outside the config module (issue #30: staged config)', () => {
  expect(rulesOf('process-env.ts')).toEqual(['no-restricted-properties']);
});
