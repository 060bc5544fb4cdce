import type { FuzzReport } from './run.js';

function table(rows: ReadonlyArray<Record<string, string | number>>): string {
  if (rows.length === 0) return '';
  const cols = Object.keys(rows[0]!);
  const width = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c]).length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => c.padEnd(width[i]!))
      .join('  ')
      .trimEnd();
  return [line(cols.map((c) => c.toUpperCase())), ...rows.map((r) => line(cols.map((c) => String(r[c]))))].join('\n') + '\n';
}

/** The fuzz run as tables and a verdict. */
export function fuzzReport(r: FuzzReport): string {
  const outcomes = (o: Record<string, number>) =>
    Object.entries(o)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k}: ${v}`)
      .join(', ');
  const surfaces = table(r.surfaces.map((s) => ({ surface: s.surface, cases: s.cases, accepted: s.accepted, answers: outcomes(s.outcomes) || '-' })));
  const check = (ok: boolean) => (ok ? 'ok' : 'FAIL');
  const checks = table([
    {
      check: 'accepted messages terminal',
      value: `${r.messages.terminal} of ${r.messages.accepted} (${outcomes(r.messages.byState)})`,
      verdict: check(r.messages.notTerminal.length === 0),
    },
    {
      check: 'results stored as sent',
      value: `${r.results.intact} of ${r.results.sent}; refused to the agent ${r.results.refused}; changed ${r.results.changed.length}; missing ${r.results.missing.length}`,
      verdict: check(r.results.changed.length === 0 && r.results.missing.length <= r.results.refused),
    },
    { check: '5xx answers (503 excepted)', value: String(r.serverErrors.length), verdict: check(r.serverErrors.length === 0) },
    {
      check: 'services ready after',
      value:
        Object.entries(r.servicesReady)
          .filter(([, v]) => !v)
          .map(([k]) => k)
          .join(', ') || 'all',
      verdict: check(Object.values(r.servicesReady).every(Boolean)),
    },
    { check: 'a plain message after', value: r.canary, verdict: check(r.canary === 'DELIVERED') },
  ]);
  const total = r.surfaces.slice(0, 3).reduce((n, s) => n + s.cases, 0) + r.surfaces[3]!.cases;
  const details = [
    ...r.messages.notTerminal.map((id) => `not terminal: ${id}`),
    ...r.results.changed.map((c) => `changed: ${c}`),
    ...r.results.missing.slice(0, 10).map((id) => `result missing: ${id}`),
    ...r.serverErrors.map((e) => `server error: ${e}`),
  ];
  return (
    `fuzz: ${total} cases (seed ${r.options.seed}) in ${r.seconds.toFixed(1)} s\n\n${surfaces}\n${checks}` +
    (details.length ? `\n${details.join('\n')}\n` : '') +
    `\n${r.ok ? '✔ every check holds' : '✘ a check failed'}\n`
  );
}
