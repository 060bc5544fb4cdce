#!/usr/bin/env node
// Generates packages/envelope/src/generated/schemas.ts (TypeScript types) from schemas/*.avsc.
// `--check` exits 1 when the committed file is stale (a unit test runs it too).
import { readFileSync, readdirSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'packages/envelope/src/generated/schemas.ts');

export function generate() {
  const dir = join(root, 'schemas');
  const decls = new Map();
  const shortName = (n) => n.slice(n.lastIndexOf('.') + 1);
  const ts = (t, ns) => {
    if (typeof t === 'string') {
      switch (t) {
        case 'null':
          return 'null';
        case 'string':
          return 'string';
        case 'int':
        case 'long':
        case 'float':
        case 'double':
          return 'number';
        case 'boolean':
          return 'boolean';
        case 'bytes':
          return 'Buffer';
        default:
          return shortName(t);
      }
    }
    if (Array.isArray(t)) return t.map((x) => ts(x, ns)).join(' | ');
    switch (t.type) {
      case 'record': {
        const fields = t.fields.map((f) => {
          const doc = f.doc ? `  /** ${f.doc} */\n` : '';
          return `${doc}  ${f.name}: ${ts(f.type, t.namespace ?? ns)};`;
        });
        const doc = t.doc ? `/** ${t.doc} */\n` : '';
        decls.set(t.name, `${doc}export interface ${t.name} {\n${fields.join('\n')}\n}`);
        return t.name;
      }
      case 'enum':
        decls.set(
          t.name,
          `export type ${t.name} = ${t.symbols.map((s) => `'${s}'`).join(' | ')};\nexport const ${t.name}Values = [${t.symbols.map((s) => `'${s}'`).join(', ')}] as const;`,
        );
        return t.name;
      case 'array':
        return `Array<${ts(t.items, ns)}>`;
      case 'map':
        return `Record<string, ${ts(t.values, ns)}>`;
      default:
        return ts(t.type, ns); // primitives with logicalType
    }
  };
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.avsc'))
    .sort()) {
    ts(JSON.parse(readFileSync(join(dir, file), 'utf8')), undefined);
  }
  const body = [...decls.keys()]
    .sort()
    .map((k) => decls.get(k))
    .join('\n\n');
  return `// Generated from schemas/*.avsc by scripts/gen-schema-types.mjs — do not edit.\n// Timestamps (timestamp-millis) are epoch milliseconds.\n\n${body}\n`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = generate();
  if (process.argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(out, 'utf8');
    } catch {
      /* not generated yet */
    }
    if (current !== text) {
      console.error(`${out} is stale: run node scripts/gen-schema-types.mjs`);
      process.exit(1);
    }
  } else {
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, text);
  }
}
