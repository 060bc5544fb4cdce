import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { adminToken, uniq, urls } from '../../helpers/env.js';
import { plainKafka, registryClient } from '../../helpers/kafka.js';
import { scrape, total } from '../../helpers/metrics.js';
import { sendStatus, statusEvent } from '../../helpers/status-event.js';
import { eventually } from '../../helpers/wait.js';
import { REACH_BIN } from '../../helpers/cli.js';

// The stuck sweep (retry-scheduler) reads the tracker's read model. A tracker that lags behind
// — here frozen with SIGSTOP, as a stalled or restarting process would be — must not make the
// sweep declare DEAD a message whose DELIVERED is already on reach.status.v1 but not yet in
// PostgreSQL (the long chaos run once found 653 such "DELIVERED and DEAD" messages after a
// kill of the tracker). The message's deadline passes while the tracker is frozen; two sweeps
// later it must still not be DEAD, and once the tracker runs again it ends DELIVERED only.
const TASK_REQUEST_BUDGET_MS = 30_000; // REACH_BUDGET_POLICY default
const GRACE_MS = 2_000; // REACH_STUCK_GRACE_MS
const SWEEP_MS = 5_000; // REACH_STUCK_SWEEP_MS
const auth = () => ({ authorization: `Bearer ${adminToken()}` });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const kafka = plainKafka();
const registry = registryClient();
let producer: Producer;

function trackerPids(): number[] {
  const ps = JSON.parse(execFileSync(process.execPath, [REACH_BIN, 'ps', '--json'], { encoding: 'utf8' })) as {
    processes: Array<{ name: string; pid: number | null; alive: boolean }>;
  };
  return ps.processes.filter((p) => p.name.startsWith('tracker') && p.alive && p.pid).map((p) => p.pid!);
}

async function statusOf(id: string): Promise<string | undefined> {
  const res = await fetch(`${urls.ingress}/v1/messages/${id}`, { headers: auth() });
  return res.ok ? ((await res.json()) as { status: string }).status : undefined;
}

async function statesOf(id: string): Promise<string[]> {
  const res = await fetch(`${urls.ingress}/v1/messages/${id}/events`, { headers: auth() });
  return ((await res.json()) as { events: Array<{ state: string }> }).events.map((e) => e.state);
}

beforeAll(async () => {
  producer = kafka.producer();
  await producer.connect();
});

afterAll(async () => {
  await producer?.disconnect();
});

describe('stuck sweep and a lagging read model', () => {
  it('does not declare DEAD a message whose DELIVERED the frozen tracker has not written yet', async () => {
    // The budget ends 4 s from now; the message is DELIVERING in the read model.
    const createdAt = Date.now() - TASK_REQUEST_BUDGET_MS + 4_000;
    const agentId = uniq('it.acked-agent');
    const delivering = statusEvent({ state: 'DELIVERING', createdAt, agentId });
    const id = delivering.message_id;
    await sendStatus(producer, registry, delivering);
    await eventually(`${id} DELIVERING`, async () => ((await statusOf(id)) === 'DELIVERING' ? true : undefined), 10_000);

    const pids = trackerPids();
    expect(pids.length).toBeGreaterThan(0);
    const heldBefore = total(await scrape(urls.retryScheduler), 'reach_retry_scheduler_sweep_held_back_total');
    for (const pid of pids) process.kill(pid, 'SIGSTOP');
    try {
      // The agent's ack came in time: DELIVERED is produced, but nobody writes it to PostgreSQL.
      await sendStatus(producer, registry, statusEvent({ messageId: id, state: 'DELIVERED', createdAt, agentId }));
      // Past the deadline + grace, and two sweeps more.
      await sleep(createdAt + TASK_REQUEST_BUDGET_MS + GRACE_MS + 2 * SWEEP_MS + 1_000 - Date.now());
      expect(total(await scrape(urls.retryScheduler), 'reach_retry_scheduler_sweep_held_back_total')).toBeGreaterThan(heldBefore);
    } finally {
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGCONT');
        } catch {
          // the supervisor replaced a tracker it found unresponsive: the new one runs anyway
        }
      }
    }
    await eventually(`${id} DELIVERED`, async () => ((await statusOf(id)) === 'DELIVERED' ? true : undefined), 30_000);
    // One more sweep after the tracker caught up: still nothing but DELIVERING → DELIVERED.
    await sleep(SWEEP_MS + 1_000);
    expect(await statesOf(id)).toEqual(['DELIVERING', 'DELIVERED']);
  });
});
