import { describe, expect, it } from 'vitest';
import { fuzzReport, runFuzz } from '@reach/chaos';

// `pnpm fuzz`, briefly, as npm test runs it (the long run's counts are in docs/faults.md): generated
// HTTP submissions, Kafka ingress envelopes with hostile values, agent frames and result frames
// against the running stack. Whatever came in: no 5xx but 503, every accepted message at a
// terminal state, every result stored exactly as sent or refused to the agent with an error
// frame, every service still ready, and a plain message still DELIVERED at the end. The seed is
// fixed so that a failure here can be run again with `pnpm fuzz --seed 2612 --cases 2000`.
describe('pnpm fuzz (short)', () => {
  it('2,000 generated cases on every public input: nothing stalls, nothing is lost or changed', { timeout: 300_000 }, async () => {
    const report = await runFuzz({ cases: 2_000, seed: 2612, settleMs: 90_000 });
    process.stdout.write(`${fuzzReport(report)}\n`);
    // the generated cases, on the three ways in (the result frames answer what was delivered)
    const inputs = report.surfaces.filter((s) => !s.surface.startsWith('result frames'));
    expect(inputs.reduce((n, s) => n + s.cases, 0)).toBe(2_000);
    // Enough of the cases were accepted that "every message terminal" means something.
    expect(report.messages.accepted).toBeGreaterThan(200);
    expect(report.serverErrors).toEqual([]);
    expect(report.messages.notTerminal).toEqual([]);
    expect(report.messages.terminal).toBe(report.messages.accepted);
    expect(report.results.sent).toBeGreaterThan(0);
    expect(report.results.changed).toEqual([]);
    // a result is missing only where it was refused to the agent with an error frame
    expect(report.results.missing.length).toBeLessThanOrEqual(report.results.refused);
    expect(Object.entries(report.servicesReady).filter(([, ready]) => !ready)).toEqual([]);
    expect(report.canary).toBe('DELIVERED');
    expect(report.ok).toBe(true);
  });
});
