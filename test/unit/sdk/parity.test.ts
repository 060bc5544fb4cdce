import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '@reach/core';
import { parseAgentFrame } from '../../../services/dispatcher/dist/protocol.js';

// One written protocol, two SDKs: docs/protocol.md must list exactly the frames the dispatcher
// reads and writes (services/dispatcher/src/protocol.ts, the deliver frame of entry.ts), and
// every scenario of docs/sdk-scenarios.md must be named by a test of each of its four runs
// (TypeScript and Python, queued and direct), in the files the list gives.
const ROOT = process.cwd();
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

function files(dir: string, suffix: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (name === 'node_modules' || name === '__pycache__') return [];
    return statSync(join(ROOT, path)).isDirectory() ? files(path, suffix) : name.endsWith(suffix) ? [relative('.', path)] : [];
  });
}

/** id → the files whose tests name it. */
function named(paths: string[], pattern: RegExp): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const path of paths) {
    for (const m of read(path).matchAll(pattern)) {
      if (!out.has(m[1]!)) out.set(m[1]!, new Set());
      out.get(m[1]!)!.add(path);
    }
  }
  return out;
}

const RUNS = ['TypeScript queued', 'TypeScript direct', 'Python queued', 'Python direct'] as const;
type Run = (typeof RUNS)[number];

interface Scenario {
  id: string;
  /** The file of each run, or `n/a: why`. */
  runs: Record<Run, string>;
}

function scenarios(): Scenario[] {
  const rows = [...read('docs/sdk-scenarios.md').matchAll(/^\| `([a-z0-9-]+)` +\|[^|\n]*\|([^|\n]+)\|([^|\n]+)\|([^|\n]+)\|([^|\n]+)\|$/gm)];
  const cell = (c: string) => c.trim().replace(/^`(.*)`$/, '$1');
  return rows.map((m) => ({ id: m[1]!, runs: Object.fromEntries(RUNS.map((run, i) => [run, cell(m[i + 2]!)])) as Record<Run, string> }));
}

const tsTests = named(files('test', '.test.ts'), /\bit\(\s*'\[([a-z0-9-]+)\]/g);
const pyTests = named(files('sdks/python/tests', '.py'), /@(?:pytest\.mark\.)?scenario\("([a-z0-9-]+)"\)/g);
const testsOf = (run: Run) => (run.startsWith('TypeScript') ? tsTests : pyTests);
/** The files a run uses for the scenarios it does run. */
const runFiles = (run: Run) =>
  new Set(
    scenarios()
      .map((s) => s.runs[run])
      .filter((f) => !f.startsWith('n/a')),
  );

/** The frame types of the tables under a heading of docs/protocol.md. */
function documentedFrames(heading: string): string[] {
  const doc = read('docs/protocol.md');
  const start = doc.indexOf(`### ${heading}\n`);
  expect(start, `docs/protocol.md has a "### ${heading}" section`).toBeGreaterThanOrEqual(0);
  const section = doc.slice(start).split(/\n#{2,3} /)[0]!;
  // The first column of each row but the header's.
  return [...section.matchAll(/^\| `([a-z_]+)` +\|/gm)]
    .map((m) => m[1]!)
    .filter((t) => t !== 'type')
    .sort();
}

describe('SDK scenarios (docs/sdk-scenarios.md)', () => {
  it('lists scenarios, each with a test file per run or a reason it does not apply', () => {
    const list = scenarios();
    expect(list.length).toBeGreaterThanOrEqual(17);
    expect(new Set(list.map((s) => s.id)).size).toBe(list.length);
    for (const s of list) {
      for (const run of RUNS) {
        const ok = run.startsWith('TypeScript') ? /^(test\/.+\.test\.ts|n\/a: .+)$/ : /^(sdks\/python\/tests\/.+\.py|n\/a: .+)$/;
        expect(s.runs[run], `${s.id}, ${run}`).toMatch(ok);
      }
      // Queued is the real thing: every scenario runs there in at least one SDK.
      expect(
        [s.runs['TypeScript queued'], s.runs['Python queued']].some((f) => !f.startsWith('n/a')),
        s.id,
      ).toBe(true);
    }
  });

  it('every scenario is named by a test of the given file in each of the four runs', () => {
    for (const s of scenarios()) {
      for (const run of RUNS) {
        const file = s.runs[run];
        const naming = [...(testsOf(run).get(s.id) ?? [])];
        if (file.startsWith('n/a'))
          expect(
            naming.filter((f) => runFiles(run).has(f)),
            `${run} tests naming ${s.id}, which does not apply`,
          ).toEqual([]);
        else expect(naming, `${run} tests naming ${s.id}`).toContain(file);
      }
    }
  });

  it('the shared scenario lists run every scenario they define, in both modes', () => {
    const shared = (path: string, pattern: RegExp) => [...read(path).matchAll(pattern)].map((m) => m[1]!).sort();
    const ts = shared('test/helpers/sdk-scenarios.ts', /^ {2}'([a-z0-9-]+)': async/gm);
    const py = shared('sdks/python/tests/scenario_list.py', /^ {4}"([a-z0-9-]+)": [a-z_0-9]+,$/gm);
    expect(ts.length).toBeGreaterThanOrEqual(13);
    expect(py).toEqual(ts);
    for (const file of ['test/unit/sdk/sdk-scenarios-direct.test.ts', 'test/integration/sdk/sdk-scenarios-queued.test.ts']) {
      for (const id of ts) expect([...(tsTests.get(id) ?? [])], `${file} runs ${id}`).toContain(file);
    }
    for (const file of ['sdks/python/tests/test_scenarios_direct.py', 'sdks/python/tests/test_scenarios_env_queued.py']) {
      for (const id of py) expect([...(pyTests.get(id) ?? [])], `${file} runs ${id}`).toContain(file);
    }
  });

  it('no test names a scenario the list does not have', () => {
    const ids = new Set(scenarios().map((s) => s.id));
    expect([...tsTests.keys(), ...pyTests.keys()].filter((id) => !ids.has(id))).toEqual([]);
  });
});

describe('the agent protocol (docs/protocol.md)', () => {
  const source = read('services/dispatcher/src/protocol.ts');

  it('lists exactly the frames the dispatcher reads', () => {
    const parser = source.slice(source.indexOf('export function parseAgentFrame'), source.indexOf('// ── frames the dispatcher sends'));
    const read = [...parser.matchAll(/case '([a-z_]+)':/g)].map((m) => m[1]!);
    expect(documentedFrames('Frames an agent sends')).toEqual([...new Set(read)].sort());
  });

  it('lists exactly the frames the dispatcher writes', () => {
    const built = [...source.matchAll(/JSON\.stringify\(\{ type: '([a-z_]+)'/g)].map((m) => m[1]!);
    const deliver = /FRAME_PREFIX = '\{"type":"([a-z_]+)"/.exec(read('services/dispatcher/src/entry.ts'))![1]!;
    expect(documentedFrames('Frames the dispatcher sends')).toEqual([...new Set([...built, deliver])].sort());
  });

  it('gives examples the dispatcher accepts for the frames an agent sends', () => {
    const agentFrames = new Set(documentedFrames('Frames an agent sends'));
    const examples = [...read('docs/protocol.md').matchAll(/```json\n([\s\S]*?)```/g)].map((m) => JSON.parse(m[1]!) as Record<string, unknown>);
    const typed = examples.filter((e) => typeof e.type === 'string');
    const shown = new Set(typed.map((e) => e.type));
    // Every frame has an example (ping/pong once for both directions).
    for (const t of [...agentFrames, ...documentedFrames('Frames the dispatcher sends')]) expect(shown, `an example of ${t}`).toContain(t);
    for (const e of typed.filter((x) => agentFrames.has(x.type as string)))
      expect(parseAgentFrame(JSON.stringify(e)), JSON.stringify(e)).toMatchObject({ type: e.type });
  });
});

describe('the Python SDK', () => {
  it('has the error table of packages/core', () => {
    const py = [
      ...read('sdks/python/src/agent_reach/errors.py').matchAll(/ErrorCodeInfo\((\d+), "([A-Z_]+)", (True|False), (\d+), "((?:[^"\\]|\\.)*)"\)/g),
    ].map((m) => ({ code: Number(m[1]), name: m[2], retryable: m[3] === 'True', httpStatus: Number(m[4]), description: m[5] }));
    expect(py).toEqual(ERROR_CODES.map((e) => ({ code: e.code, name: e.name, retryable: e.retryable, httpStatus: e.httpStatus, description: e.description })));
  });
});
