import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reachCli } from '../../helpers/cli.js';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { uniq } from '../../helpers/env.js';

// `reach rules check <file>` (docs/design.md §5) as an operator runs it: the built CLI as a child
// process on files on disk. It needs no running service.

const reach = (...args: string[]) => reachCli([...args]);

let dir: string;
let good: string;
let warned: string;
let bad: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), `${uniq('rules')}-`));
  good = join(dir, 'good.yaml');
  warned = join(dir, 'warned.yaml');
  bad = join(dir, 'bad.yaml');
  await writeFile(
    good,
    'rules:\n  - name: a\n    when: {message_type: x}\n    action: {dispatch: random}\n  - name: b\n    when: {}\n    action: {dispatch: weighted}\n',
  );
  await writeFile(warned, 'rules:\n  - name: a\n    when: {}\n    action: {dispatch: broadcast, sticky_by: session_id}\n');
  await writeFile(
    bad,
    [
      'rules:',
      '  - name: route_to_retriever',
      '    when: {message_type: task_request}',
      '    action: {dispatch: random}',
      '  - name: route_to_aggregator',
      '    when:',
      '      message_type: task_result',
      '    action:',
      '      dispatch: rnadom',
      '  - name: shadowed',
      '    when: {message_type: task_request, target_role: retriever}',
      '    action: {dispatch: random}',
      '',
    ].join('\n'),
  );
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('reach rules check', () => {
  it('passes a valid file', async () => {
    const out = await reach('rules', 'check', good);
    expect(out).toEqual({ code: 0, stdout: `✔ ${good}: 2 rules\n`, stderr: '' });
  });

  it('prints warnings but exits 0', async () => {
    const out = await reach('rules', 'check', warned);
    expect(out.code).toBe(0);
    expect(out.stdout).toBe(`✔ ${warned}: 1 rule (1 warning)\n`);
    expect(out.stderr).toBe(`${warned}:4:46: warning: rule "a": action.sticky_by is ignored: only dispatch sticky uses it (dispatch is broadcast)\n`);
  });

  it('prints every error at file:line:column and exits 1', async () => {
    const out = await reach('rules', 'check', bad);
    expect(out.code).toBe(1);
    expect(out.stdout).toBe('');
    expect(out.stderr.split('\n')).toEqual([
      `${bad}:9:17: error: rule "route_to_aggregator": action.dispatch must be one of random, sticky, weighted, broadcast (got "rnadom")`,
      `${bad}:10:5: error: rule "shadowed" is unreachable: rule "route_to_retriever" (line 2) already matches every message it matches (first match wins)`,
      `✘ ${bad}: 2 errors`,
      '',
    ]);
  });

  it('--json reports ok, the rule names and the diagnostics', async () => {
    const passed = await reach('rules', 'check', good, '--json');
    expect(passed.code).toBe(0);
    expect(JSON.parse(passed.stdout)).toMatchObject({ ok: true, rules: ['a', 'b'], diagnostics: [] });

    const failed = await reach('rules', 'check', bad, '--json');
    expect(failed.code).toBe(1);
    const report = JSON.parse(failed.stdout) as {
      ok: boolean;
      rules: string[];
      diagnostics: Array<{ severity: string; at: { line: number; column: number }; rule?: string }>;
    };
    expect(report.ok).toBe(false);
    expect(report.rules).toEqual([]);
    expect(report.diagnostics.map((d) => [d.severity, d.at.line, d.at.column, d.rule])).toEqual([
      ['error', 9, 17, 'route_to_aggregator'],
      ['error', 10, 5, 'shadowed'],
    ]);
  });

  it('passes the shipped deploy/rules.yaml', async () => {
    const out = await reach('rules', 'check', 'deploy/rules.yaml');
    expect(out).toEqual({ code: 0, stdout: '✔ deploy/rules.yaml: 3 rules\n', stderr: '' });
  });

  it('fails on a missing file and explains usage errors', async () => {
    const missing = await reach('rules', 'check', join(dir, 'missing.yaml'));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`${join(dir, 'missing.yaml')}:1:1: error: cannot read the rules file (ENOENT)`);
    const usage = await reach('rules', 'check');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('reach rules check <file>');
  });
});
