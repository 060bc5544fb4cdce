import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

// The design lives in the repository: every requirement id (R-…) and every section (§N) that
// code, tests or docs cite must resolve to a heading of docs/requirements.md or of the document
// named before it, and nothing may point at documents that are not in the repository (the
// product's original reference documents, its design notes, a path outside the checkout).
// A failure names the file and line of each broken citation.

const ROOT = process.cwd();
const SELF = 'test/unit/docs/citations.test.ts';

/**
 * Files not scanned: vendored text, and two kinds of frozen text whose old citations are
 * explained at the top of docs/design.md: the applied migrations (their checksums are recorded
 * in every database, so even a comment cannot change) and the registered Avro schemas with the
 * types generated from them (a changed `doc` is a new schema version in every registry).
 */
const NOT_SCANNED = [
  /^pnpm-lock\.yaml$/,
  /^patches\//,
  /^packages\/store\/migrations\/.*\.sql$/,
  /^schemas\/.*\.avsc$/,
  /^packages\/envelope\/src\/generated\//,
  /\.(png|jpg|ico|jsa|jar)$/,
];

const tracked = execFileSync('git', ['ls-files', '-z'], { encoding: 'utf8' })
  .split('\0')
  .filter((f) => f && f !== SELF && existsSync(f) && !NOT_SCANNED.some((p) => p.test(f)));
// Files added but not committed yet count too (a new doc cited from a new file).
const untracked = execFileSync('git', ['ls-files', '-z', '--others', '--exclude-standard'], { encoding: 'utf8' })
  .split('\0')
  .filter((f) => f && f !== SELF && existsSync(f) && !NOT_SCANNED.some((p) => p.test(f)));
const FILES = [...new Set([...tracked, ...untracked])];

const text = new Map(FILES.map((f) => [f, readFileSync(f, 'utf8')]));
const read = (f: string): string => text.get(f) ?? readFileSync(f, 'utf8');

interface Finding {
  file: string;
  line: number;
  what: string;
}
const at = (file: string, body: string, index: number, what: string): Finding => ({ file, line: body.slice(0, index).split('\n').length, what });
const show = (fs: Finding[]): string[] => fs.map((f) => `${f.file}:${f.line}: ${f.what}`);

/** The headings of a markdown file. */
const headings = (file: string): string[] => [...read(file).matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => m[1]!.trim());

const REQUIREMENTS = 'docs/requirements.md';
const requirementIds = new Set(headings(REQUIREMENTS).flatMap((h) => /^(R-[A-Z]\d+)\b/.exec(h)?.[1] ?? []));

/** A section `N` of a document: a heading "§N …" or "N. …". */
function hasSection(doc: string, section: string): boolean {
  const n = section.replace(/\.$/, '');
  return headings(doc).some((h) => h.startsWith(`§${n} `) || h === `§${n}` || h.startsWith(`${n}. `));
}

describe('citations resolve inside the repository', () => {
  it('docs/requirements.md and docs/design.md exist and define ids and sections', () => {
    expect(requirementIds.size).toBeGreaterThan(50);
    expect(hasSection('docs/design.md', '1')).toBe(true);
    expect(hasSection('docs/design.md', '6')).toBe(true);
  });

  it('cites no document that is not in the repository', () => {
    // Built from parts so this file does not match itself.
    const outside = [
      new RegExp(`\\b${'SP'}EC\\b`),
      new RegExp(`\\b${'DES'}IGN\\b`),
      new RegExp(`\\b(${'SP'}EC|${'DES'}IGN|${'STY'}LE)\\.md\\b`),
      new RegExp(`/work/${'sha'}red`),
      new RegExp(`\\b${'see'}ds/`),
      new RegExp(`\\b${'see'}d 00\\d\\b`),
    ];
    const found: Finding[] = [];
    for (const [file, body] of text)
      for (const re of outside) for (const m of body.matchAll(new RegExp(re.source, re.flags + 'g'))) found.push(at(file, body, m.index, m[0]));
    expect(show(found)).toEqual([]);
  });

  it('every requirement id cited is a heading of docs/requirements.md', () => {
    const found: Finding[] = [];
    for (const [file, body] of text)
      for (const m of body.matchAll(/\bR-([A-Z])(\d+)\b/g))
        if (!requirementIds.has(m[0])) found.push(at(file, body, m.index, `${m[0]} is not in ${REQUIREMENTS}`));
    expect(show(found)).toEqual([]);
  });

  it('every §N names the document it is in, and that document has the section', () => {
    const found: Finding[] = [];
    for (const [file, body] of text) {
      for (const m of body.matchAll(/§\s?(\d+(?:\.\d+)*)/g)) {
        const named = citedDocument(file, body, m.index);
        if (named === undefined) {
          found.push(at(file, body, m.index, `${m[0]} names no document`));
          continue;
        }
        if (!named.toLowerCase().endsWith('.md')) continue; // an outside reference
        const doc = resolveDoc(file, named);
        if (!doc) found.push(at(file, body, m.index, `${named} ${m[0]}: no such file`));
        else if (!hasSection(doc, m[1]!)) found.push(at(file, body, m.index, `${doc} has no section ${m[0]}`));
      }
    }
    expect(show(found)).toEqual([]);
  });

  it('every quoted heading of a doc or the README that is cited exists', () => {
    // e.g. docs/pipeline.md "Poison records", README "Performance"
    const found: Finding[] = [];
    for (const [file, body] of text) {
      for (const m of body.matchAll(/\b((?:docs\/)?[\w-]+\.md|README)\s+"([^"\n]{3,60})"/g)) {
        const doc = resolveDoc(file, m[1] === 'README' ? 'README.md' : m[1]!);
        if (!doc) found.push(at(file, body, m.index, `${m[1]}: no such file`));
        else if (!headings(doc).some((h) => h.toLowerCase().includes(m[2]!.toLowerCase())))
          found.push(at(file, body, m.index, `${doc} has no heading "${m[2]}"`));
      }
    }
    expect(show(found)).toEqual([]);
  });

  it('every relative link of a markdown file points at a file inside the repository', () => {
    const found: Finding[] = [];
    for (const [file, body] of text) {
      if (!file.endsWith('.md')) continue;
      for (const m of body.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!.split('#')[0]!;
        if (!target || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // an anchor, or a URL (http:, mailto:)
        const path = target.startsWith('/') ? target : normalize(join(dirname(file), target));
        if (target.startsWith('/') || relative(ROOT, join(ROOT, path)).startsWith('..')) found.push(at(file, body, m.index, `${target} leaves the repository`));
        else if (!existsSync(path)) found.push(at(file, body, m.index, `${target}: no such file`));
      }
    }
    expect(show(found)).toEqual([]);
  });

  it('every requirement has a row in the traceability table, with where it lives and what proves it', () => {
    const body = read(REQUIREMENTS);
    const table = body.slice(body.indexOf('## Traceability'));
    const rows = new Map([...table.matchAll(/^\| (R-[A-Z]\d+) +\|([^|\n]*)\|([^|\n]*)\|$/gm)].map((m) => [m[1]!, [m[2]!.trim(), m[3]!.trim()]]));
    const incomplete = [...requirementIds].filter((id) => !rows.get(id)?.every((cell) => cell.length > 0));
    expect(incomplete).toEqual([]);
    expect([...rows.keys()].filter((id) => !requirementIds.has(id))).toEqual([]);
  });

  it('every path the design and the traceability table name exists', () => {
    const found: Finding[] = [];
    for (const file of ['docs/design.md', REQUIREMENTS]) {
      const body = read(file);
      for (const m of body.matchAll(/`((?:packages|services|sdks|test|deploy|scripts|schemas|bench|examples)\/[\w./@-]+|docker-compose\.yml)`/g))
        if (!existsSync(m[1]!)) found.push(at(file, body, m.index, `${m[1]}: no such path`));
    }
    expect(show(found)).toEqual([]);
  });
});

/**
 * What a § at `index` cites. Right before it (across a chain such as "§3, §4" or "§11–§16", and
 * the closing marks of a link or a code span): a markdown file (`docs/design.md §4`,
 * `[design.md](design.md) §4`), or a reference outside the repository that is no document of ours
 * (the A2A specification: "spec §3.1"; an issue: "#13 §5"). Without one, a markdown file cites its
 * own sections, and a code comment the nearest such name before it in the same passage.
 */
function citedDocument(file: string, body: string, index: number): string | undefined {
  const before = body.slice(Math.max(0, index - 300), index);
  const connector = String.raw`[\s\`)\]*/#]*(?:(?:,|;|and|or|to|–|-)[\s\`)\]*/#]*)?`;
  const chain = String.raw`(?:§\s?\d+(?:\.\d+)*${connector})*$`;
  const direct = new RegExp(String.raw`(?:([\w./-]*[\w-]+\.md)|\b(spec|A2A)|(#\d+))${connector}${chain}`, 'i').exec(before);
  if (direct) return direct[1] ?? direct[2] ?? direct[3];
  if (file.endsWith('.md')) return file;
  return [...before.slice(-200).matchAll(/(?:\b[\w./-]*[\w-]+\.md\b|\bspec\b|\bA2A\b|#\d+)/gi)].at(-1)?.[0];
}

/**
 * A markdown file a citation names: relative to the citing file, else to the repository root,
 * else under docs/. A bare README is the nearest one above the citing file (a package's own).
 */
function resolveDoc(from: string, named: string): string | undefined {
  const candidates = [normalize(join(dirname(from), named)), normalize(named), normalize(join('docs', named))];
  if (named === 'README.md') {
    candidates.length = 0;
    for (let dir = dirname(from); ; dir = dirname(dir)) {
      candidates.push(normalize(join(dir, named)));
      if (dir === '.' || dir === '/' || dir === '') break;
    }
  }
  return candidates.find((c) => !c.startsWith('..') && existsSync(c));
}
