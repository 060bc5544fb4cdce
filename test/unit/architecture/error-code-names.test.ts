import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { expect, it } from 'vitest';
import { ERROR, ERROR_CODES } from '@reach/core';

// Error codes are written by name (ERROR.ACK_TIMEOUT), never as bare numbers: the table in
// packages/core/src/errors.ts is the one place each number stands. This reads every source file
// of packages/ and services/ and fails on a numeric literal (in code or in a type, not in a
// comment or a string) that is one of the table's codes, outside the table and the allow-list.
const root = join(import.meta.dirname, '..', '..', '..');
const TABLE = 'packages/core/src/errors.ts';

/** Places where such a number is not an error code, each with its reason: `file` → numbers. */
const ALLOWED: Record<string, { numbers: number[]; why: string }> = {
  'services/dispatcher/src/protocol.ts': { numbers: [1001], why: 'WebSocket close code GOING_AWAY (RFC 6455), not an error code' },
  'packages/sdk/src/agent-socket.ts': { numbers: [1001], why: 'WebSocket close code goingAway (RFC 6455), not an error code' },
  // Being edited elsewhere (the dispatcher's deadline work); its codes get names when that lands.
};

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'dist' || entry.name === 'generated') continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(path));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') && !entry.name.endsWith('.test.ts')) out.push(path);
  }
  return out;
}

function roots(): string[] {
  const out: string[] = [];
  for (const top of ['packages', 'services']) {
    for (const entry of readdirSync(join(root, top), { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      for (const sub of ['src', 'web/src']) {
        const dir = join(root, top, entry.name, sub);
        try {
          readdirSync(dir);
          out.push(dir);
        } catch {
          // no such folder
        }
      }
    }
  }
  return out;
}

/** Line and value of every numeric literal in `text` that is an error code. */
function codesIn(name: string, text: string, codes: ReadonlySet<number>): Array<{ line: number; code: number }> {
  const source = ts.createSourceFile(name, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: Array<{ line: number; code: number }> = [];
  const visit = (node: ts.Node): void => {
    if (ts.isNumericLiteral(node) && codes.has(Number(node.text))) {
      found.push({ line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1, code: Number(node.text) });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

it('names every code, each typed as its own number', () => {
  for (const e of ERROR_CODES) expect(ERROR[e.name as keyof typeof ERROR]).toBe(e.code);
  expect(Object.keys(ERROR)).toHaveLength(ERROR_CODES.length);
  const ackTimeout: 3002 = ERROR.ACK_TIMEOUT;
  expect(ackTimeout).toBe(3002);
});

it('finds no bare error-code number in the sources outside the table', () => {
  const codes = new Set(ERROR_CODES.map((e) => e.code));
  const files = roots().flatMap(sourceFiles);
  expect(files.length).toBeGreaterThan(300);
  const found = files
    .filter((f) => relative(root, f) !== TABLE)
    .flatMap((f) => codesIn(f, readFileSync(f, 'utf8'), codes).map((hit) => ({ ...hit, file: relative(root, f) })))
    .filter((hit) => !ALLOWED[hit.file]?.numbers.includes(hit.code))
    .map((hit) => `${hit.file}:${hit.line}: ${hit.code}`);
  expect(found.join('\n')).toBe('');
});

it('sees a planted bare code, and not one in a comment or a string', () => {
  const codes = new Set(ERROR_CODES.map((e) => e.code));
  const hits = (text: string) => codesIn('x.ts', text, codes).map((hit) => hit.code);
  expect(hits("const f = { code: 3002, reason: 'x' };\ntype T = 3003 | 1002;")).toEqual([3002, 3003, 1002]);
  expect(hits("// 3002 ACK_TIMEOUT\nconst m = 'closed with 4101';\nconst n = 3000;")).toEqual([]);
});
