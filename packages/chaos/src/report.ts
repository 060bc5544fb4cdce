import type { ChaosReport } from './run.js';

function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(head), ...rows.map(line)].join('\n');
}

const ms = (v: number | null) => (v === null ? 'never' : `${(v / 1000).toFixed(1)} s`);

/** The run as tables: each fault with its recovery, then the counts that must be zero. */
export function chaosReport(r: ChaosReport): string {
  const v = r.verdict;
  const o = r.options;
  const faults = table(
    ['t (s)', 'fault', 'lasted', 'first record handled after', 'flowing again after', 'max send → agent wait', 'never delivered'],
    r.faults.map((f) => [
      f.atS.toFixed(0),
      f.fault,
      ms(f.healedAfterMs),
      f.firstHandledAfterMs === undefined ? '—' : f.firstHandledAfterMs === null ? 'no event' : ms(f.firstHandledAfterMs),
      ms(f.recoveredAfterMs),
      ms(f.maxWaitMs),
      String(f.neverDelivered),
    ]),
  );
  const counts = table(
    ['count', 'value', 'must be'],
    [
      ['accepted messages lost', String(v.lost), '0'],
      ['handler executions duplicated per idempotency key among live agents', `${v.duplicatedKeys} keys (${v.duplicateExecutions} extra runs)`, '0'],
      ['not terminal after the faults heal', String(v.notTerminal), '0'],
      ['DEAD though acked', String(v.deadThoughAcked), '0'],
      ['illegal state transitions', String(v.illegalTransitions), '0'],
      ['redelivery rate', `${(v.redeliveryRate * 100).toFixed(2)} %`, 'printed'],
      ['re-run after an agent was killed mid-handler (at-least-once)', String(v.rerunAfterKill), 'printed'],
    ],
  );
  const examples = Object.entries(v.examples)
    .map(([what, ids]) => `  ${what}: ${ids.join('; ')}`)
    .join('\n');
  return [
    `reach chaos: ${o.rate} msg/s over ${o.via === 'kafka' ? 'the Kafka ingress' : 'HTTP'} (unique idempotency keys), ${o.agentProcesses}×${o.agentsPerProcess} SDK agents (${o.handlerMs} ms handlers) + ${o.rawAgents} raw WebSocket agents, ${o.cycles} cycle(s) of ${o.faults.length} faults, ${o.phaseS} s under load after each; ${r.seconds.toFixed(0)} s in all`,
    '',
    faults,
    '',
    `accepted ${v.accepted} (not accepted after retries: ${v.refused}); DELIVERED ${v.delivered}, DEAD ${v.dead}, REJECTED ${v.rejected}`,
    '',
    counts,
    ...(examples ? ['', 'examples:', examples] : []),
    '',
    r.ok ? '✔ nothing lost, nothing duplicated, nothing stranded' : '✘ a must-be-zero count is not zero',
  ].join('\n');
}
