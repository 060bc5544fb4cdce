import { beforeAll, describe, expect, it } from 'vitest';
import { chaosReport, runChaos, SHORT } from '@reach/chaos';
import { startTestAgent, stopTestAgents } from '@reach/sdk/testing';
import { eventually } from '../../helpers/wait.js';

// `pnpm chaos --short`, as npm test runs it: every fault of the short preset in turn under
// steady load (40 msg/s over HTTP, each message with its own idempotency key; SDK agents in
// killable processes plus raw WebSocket agents), then every accepted message looked up in the
// read model. Nothing lost, no handler run twice for one key among live agents, nothing left
// non-terminal, nothing DEAD that an agent acked, no illegal state transition.
// The degradation tests before this one restart the broker; the router's registry views then
// rejoin their groups (a kafkajs consumer restarted after the broker came back waits for its old
// member for up to the 10 s rebalance timeout). The run starts once an agent is routable again,
// so its baseline phase measures the pipeline, not the previous test's outage.
beforeAll(async () => {
  await eventually(
    'an agent routable again after the previous tests',
    async () => {
      try {
        await startTestAgent();
        return true;
      } catch {
        return false;
      } finally {
        await stopTestAgents();
      }
    },
    90_000,
    1_000,
  );
}, 120_000);

describe('pnpm chaos (short)', () => {
  it('kill -9 of every service, the broker, an agent mid-handler, and a slow agent: nothing lost, duplicated or stranded', { timeout: 300_000 }, async () => {
    const report = await runChaos(SHORT, (line) => process.stdout.write(`${line}\n`));
    process.stdout.write(`${chaosReport(report)}\n`);
    const v = report.verdict;
    expect(v.accepted).toBeGreaterThan(SHORT.rate * SHORT.phaseS * SHORT.faults.length * 0.5);
    expect({
      lost: v.lost,
      duplicatedKeys: v.duplicatedKeys,
      notTerminal: v.notTerminal,
      deadThoughAcked: v.deadThoughAcked,
      illegalTransitions: v.illegalTransitions,
    }).toEqual({ lost: 0, duplicatedKeys: 0, notTerminal: 0, deadThoughAcked: 0, illegalTransitions: 0 });
    expect(v.delivered).toBe(v.accepted);
  });
});
