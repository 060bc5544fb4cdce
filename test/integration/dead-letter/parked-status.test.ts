import { describe, expect, it } from 'vitest';
import { testClient } from '@reach/sdk/testing';
import { reachCli } from '../../helpers/cli.js';
import { cap, entriesOf, eventually, message } from './dlq-helpers.js';

// Issue #25 item 8: `reach status` of a parked message said only PENDING. The router's PENDING
// 2001 "parked" (no agent can take it; the dead-letter service redrives it when one appears)
// never reached the read model's row, which kept ingress's bare PENDING of the same attempt;
// so the stuck sweep, which leaves parked messages alone until their expire_at (R-B10),
// did not see it was parked and declared it DEAD 3005 at its budget's end.
const client = testClient();
const TASK_REQUEST_BUDGET_MS = 30_000; // REACH_BUDGET_POLICY default
// REACH_STUCK_GRACE_MS (2 s), two sweeps (REACH_STUCK_SWEEP_MS, 5 s) and the tracker's lag
const SWEEP_PASSES_MS = 2_000 + 2 * 5_000 + 8_000;

interface Status {
  status: string;
  code: number | null;
  name: string | null;
  reason: string | null;
}

describe('a parked message (issue #25 item 8)', () => {
  it('shows as parked, with why, in the read model and `reach status`, and stays parked past its budget until its expire_at', async () => {
    const capability = cap('nobody');
    const sentAt = Date.now();
    const sent = await client.submit({ capability, payload: { wait: 'for an agent' }, expire_at: Date.now() + 180_000 });
    await eventually('the parked NO_ROUTE entry', async () => (await entriesOf(capability, 'NO_ROUTE'))[0]);
    const parked = await eventually('the read model says why it waits', async () => {
      const m = (await message(sent.message_id)) as Status | undefined;
      return m?.code === 2001 ? m : undefined;
    });
    expect(parked).toMatchObject({ status: 'PENDING', code: 2001, name: 'NO_ROUTE', reason: 'parked' });

    const shown = await reachCli(['status', sent.message_id]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/^status\s+PENDING$/m);
    expect(shown.stdout).toMatch(/^waiting\s+parked \(2001 NO_ROUTE\): .+; redriven when an agent that can take it appears, until \S+Z$/m);

    // past its budget (and the sweeps after it) it is still parked, not DEAD 3005
    const after = sentAt + TASK_REQUEST_BUDGET_MS + SWEEP_PASSES_MS;
    await new Promise((r) => setTimeout(r, Math.max(0, after - Date.now())));
    expect(await message(sent.message_id)).toMatchObject({ status: 'PENDING', code: 2001 });
  }, 120_000);
});
