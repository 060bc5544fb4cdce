import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { expect, it } from 'vitest';
import * as core from '@reach/core';

// Header names and name grammars each have one home in @reach/core (headers.ts, grammar.ts):
// no other source of packages/ or services/ spells a header name as a string literal or writes
// one of the grammars as a regex literal of its own.
const root = join(import.meta.dirname, '..', '..', '..');
const HOMES = new Set(['packages/core/src/headers.ts', 'packages/core/src/grammar.ts']);

/** Where the same text is not a header name, each with its reason: `file` → strings. */
const ALLOWED: Record<string, { strings: string[]; why: string }> = {
  'services/dead-letter/src/entry.ts': { strings: ['traceparent'], why: 'a column of the dead-letter table' },
  'services/dead-letter/src/store.ts': { strings: ['traceparent'], why: 'a column of the dead-letter table' },
  'packages/cli/src/bin.ts': { strings: ['idempotency-key'], why: 'the name of a command-line option' },
  'services/ingress/src/a2a-api.ts': { strings: ['A2A-Version'], why: 'the query parameter A2A allows in place of the header' },
};

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const entry of entries) {
    if (entry.name === 'node_modules' || entry.name === 'dist' || entry.name === 'generated') continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(path));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

const files = ['packages', 'services'].flatMap((top) =>
  readdirSync(join(root, top), { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .flatMap((e) => sourceFiles(join(root, top, e.name, 'src'))),
);

/** Every string literal (without substitutions) and every regex literal of a file. */
function literals(file: string): { strings: string[]; regexes: string[] } {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const strings: string[] = [];
  const regexes: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) strings.push(node.text);
    else if (node.kind === ts.SyntaxKind.RegularExpressionLiteral) regexes.push((node as ts.RegularExpressionLiteral).text);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return { strings, regexes };
}

const headerNames = Object.entries(core)
  .filter(
    ([name, v]) =>
      typeof v === 'string' &&
      (/_HEADER(_PREFIX)?$/.test(name) || ['PREFERRED_AGENT', 'ON_SATURATION', 'CAPABILITY_TAGS', 'FANOUT_PARENT', 'FANOUT_AGENT'].includes(name)),
  )
  .map(([, v]) => v as string);
const grammars = [
  core.AGENT_ID_PATTERN,
  core.AGENT_TYPE_PATTERN,
  core.DOMAIN_PATTERN,
  core.TAG_PATTERN,
  core.CAPABILITY_NAME_PATTERN,
  core.ENVELOPE_NAME_PATTERN,
  core.NAME_FILTER_PATTERN,
];

it('spells each header name once, in @reach/core', () => {
  expect(files.length).toBeGreaterThan(300);
  expect(headerNames).toEqual(expect.arrayContaining(['reach-token', 'reach-attempt', 'traceparent', 'idempotency-key', 'retry-after', 'reach-result-status']));
  const names = new Set(headerNames);
  const found: string[] = [];
  for (const file of files) {
    const rel = relative(root, file);
    if (HOMES.has(rel)) continue;
    for (const s of literals(file).strings) if (names.has(s.toLowerCase()) && !ALLOWED[rel]?.strings.includes(s)) found.push(`${rel}: '${s}'`);
  }
  expect(found.join('\n')).toBe('');
});

it('writes each name grammar once, in @reach/core', () => {
  const sources = new Set(grammars.map((g) => `/${g.source}/${g.flags}`));
  const found: string[] = [];
  for (const file of files) {
    const rel = relative(root, file);
    if (HOMES.has(rel)) continue;
    for (const r of literals(file).regexes) if (sources.has(r)) found.push(`${rel}: ${r}`);
  }
  expect(found.join('\n')).toBe('');
});

it('matches the Python SDK, which keeps its own copies', () => {
  const py = (file: string) => readFileSync(join(root, 'sdks', 'python', 'src', 'agent_reach', file), 'utf8');
  expect(py('pending_requests.py')).toContain(`RESULT_STATUS_HEADER = "${core.RESULT_STATUS_HEADER}"`);
  expect(py('session.py')).toContain(`CONTEXT_HEADER_PREFIX = "${core.CONTEXT_HEADER_PREFIX}"`);
  expect(py('reach_client.py')).toContain(`"${core.IDEMPOTENCY_KEY_HEADER}"`);
  expect(py('http.py')).toContain(`"${core.RETRY_AFTER_HEADER}"`);
});
