import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import avro from 'avsc';

/**
 * The Avro schemas of schemas/, made self-contained: a file may name a type defined in another
 * file (`"type": "reach.v1.Envelope"`); the loader inlines that definition where it is first
 * used, so each schema registers as one standalone document (no registry references needed).
 */
export const SCHEMA_DIR = fileURLToPath(new URL('../../../schemas/', import.meta.url));

export interface SchemaDef {
  /** Full name, e.g. reach.v1.Envelope. */
  readonly name: string;
  /** The self-contained schema as registered. */
  readonly schema: Record<string, unknown>;
  readonly canonical: string;
  readonly type: avro.Type;
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function fullName(node: { name?: unknown; namespace?: unknown }, ns: string | undefined): string {
  const name = String(node.name);
  if (name.includes('.')) return name;
  const space = typeof node.namespace === 'string' ? node.namespace : ns;
  return space ? `${space}.${name}` : name;
}

function inline(node: Json, files: Map<string, Json>, defined: Set<string>, ns: string | undefined): Json {
  if (typeof node === 'string') {
    const file = files.get(node);
    if (file !== undefined && !defined.has(node)) return inline(file, files, defined, ns);
    return node;
  }
  if (Array.isArray(node)) return node.map((n) => inline(n, files, defined, ns));
  if (node === null || typeof node !== 'object') return node;
  const out: { [k: string]: Json } = { ...node };
  let innerNs = ns;
  if ((node.type === 'record' || node.type === 'enum' || node.type === 'fixed') && typeof node.name === 'string') {
    const fn = fullName(node, ns);
    defined.add(fn);
    innerNs = fn.includes('.') ? fn.slice(0, fn.lastIndexOf('.')) : ns;
  }
  if (Array.isArray(node.fields)) {
    out.fields = node.fields.map((f) => {
      if (f === null || typeof f !== 'object' || Array.isArray(f)) return f;
      return { ...f, type: inline(f.type as Json, files, defined, innerNs) };
    });
  }
  if (node.items !== undefined) out.items = inline(node.items, files, defined, innerNs);
  if (node.values !== undefined) out.values = inline(node.values, files, defined, innerNs);
  if (typeof node.type === 'object' || (typeof node.type === 'string' && files.has(node.type))) {
    out.type = inline(node.type, files, defined, innerNs);
  }
  return out;
}

export function loadSchemas(dir: string = SCHEMA_DIR): Map<string, SchemaDef> {
  const files = new Map<string, Json>();
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.avsc'))
    .sort()) {
    const json = JSON.parse(readFileSync(`${dir}/${file}`, 'utf8')) as { name: string; namespace?: string };
    const name = fullName(json, undefined);
    if (`${name}.avsc` !== file) throw new Error(`schemas/${file} defines ${name}: the file must be named ${name}.avsc`);
    files.set(name, json as unknown as Json);
  }
  const out = new Map<string, SchemaDef>();
  for (const [name, json] of files) {
    const schema = inline(json, files, new Set(), undefined) as Record<string, unknown>;
    const type = avro.Type.forSchema(schema as avro.Schema);
    out.set(name, { name, schema, canonical: JSON.stringify(schema), type });
  }
  return out;
}

let cached: Map<string, SchemaDef> | undefined;

/** The schemas of this build, loaded once. */
export function schemas(): Map<string, SchemaDef> {
  cached ??= loadSchemas();
  return cached;
}

export function schemaDef(name: string): SchemaDef {
  const def = schemas().get(name);
  if (!def) throw new Error(`no schema ${name} in ${SCHEMA_DIR}`);
  return def;
}
