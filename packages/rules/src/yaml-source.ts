import { isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node } from 'yaml';
import type { Diagnostic, SourcePosition } from './types.js';

/**
 * A parsed rules file that can answer "where in the file is this value?" for a JSON path, so
 * every diagnostic — YAML syntax, schema or semantic — points at file:line:column.
 */
export class YamlSource {
  readonly doc: Document.Parsed;
  private readonly lines = new LineCounter();

  constructor(
    readonly text: string,
    readonly file: string,
  ) {
    // prettyErrors off: the message stays one line, the position comes from our LineCounter.
    this.doc = parseDocument(text, { lineCounter: this.lines, prettyErrors: false, uniqueKeys: true });
  }

  /** YAML syntax errors and warnings (bad indentation, duplicate keys, tabs, …). */
  syntaxDiagnostics(): Diagnostic[] {
    const out: Diagnostic[] = [];
    for (const e of this.doc.errors) out.push({ severity: 'error', at: this.position(e.pos[0]), message: `invalid YAML: ${e.message}` });
    for (const w of this.doc.warnings) out.push({ severity: 'warning', at: this.position(w.pos[0]), message: `YAML: ${w.message}` });
    return out;
  }

  position(offset: number): SourcePosition {
    const { line, col } = this.lines.linePos(Math.max(0, Math.min(offset, this.text.length)));
    return { file: this.file, line, column: col };
  }

  /**
   * Where the value at `path` starts. An empty value (`when:` with nothing after it) and a path
   * that leads nowhere point at the nearest key instead, which is where the reader looks.
   */
  valueAt(path: readonly (string | number)[]): SourcePosition {
    const { node, key, parent } = this.walk(path);
    if (node && !isEmpty(node)) return this.position(node.range![0]);
    if (key) return this.position(key.range![0]);
    return this.position(parent?.range?.[0] ?? 0);
  }

  /** Where the key `name` of the mapping at `path` is written (for unknown fields). */
  keyAt(path: readonly (string | number)[], name: string): SourcePosition {
    const { node } = this.walk(path);
    if (isMap(node)) {
      const pair = node.items.find((p) => keyName(p.key) === name);
      if (pair && pair.key && (pair.key as Node).range) return this.position((pair.key as Node).range![0]);
    }
    return this.valueAt(path);
  }

  private walk(path: readonly (string | number)[]): { node: Node | null; key: Node | null; parent: Node | null } {
    let node = this.resolve(this.doc.contents as Node | null);
    let key: Node | null = null;
    let parent: Node | null = null;
    for (const segment of path) {
      if (!node) break;
      parent = node;
      if (isMap(node)) {
        const pair = node.items.find((p) => keyName(p.key) === String(segment));
        if (!pair) return { node: null, key, parent };
        key = (pair.key as Node | null) ?? null;
        node = this.resolve((pair.value as Node | null) ?? null);
      } else if (isSeq(node)) {
        node = this.resolve((node.items[Number(segment)] as Node | undefined) ?? null);
        key = null;
      } else {
        return { node: null, key, parent };
      }
    }
    return { node, key, parent };
  }

  private resolve(node: Node | null): Node | null {
    return isAlias(node) ? ((node.resolve(this.doc) as Node | undefined) ?? null) : node;
  }
}

function keyName(key: unknown): string | undefined {
  return isScalar(key) ? String(key.value) : undefined;
}

function isEmpty(node: Node): boolean {
  return !node.range || (isScalar(node) && node.value === null && node.range[0] === node.range[1]);
}
