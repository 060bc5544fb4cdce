import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { uniqueName } from '@reach/sdk/testing';
import { createRedis, type Redis } from '@reach/store';
import { stack } from '../../helpers/env.js';
import { reachCli } from '../../helpers/cli.js';
import { plainKafka, statusTap, type TopicTap } from '../../helpers/kafka.js';
import { eventually } from '../../helpers/wait.js';
import { ReplayBuffer } from '../../../services/dispatcher/dist/replay-buffer.js';
import { deregisterAgents, registeredAgent, TestAgent } from '../dispatcher/harness.js';
import { storeDelivery } from '../dispatcher/stored-delivery.js';

// Nothing is produced before a send: a delivery's DELIVERING event is written after it went out,
// with its outcome or alone (sent-ledger.ts). So a broker that stops answering does not hold
// back what is buffered. When a pump had to produce an event before it could send (an orphan's
// DELIVERING), the entries behind it waited for the broker, their ack deadlines ran meanwhile,
// and the sweeper failed them while the agent got them later anyway — the task ran on two agents
// (`pnpm chaos --via kafka --faults kill-kafka,kill-dispatcher --rate 500`: 31 tasks run twice).
// The test freezes the broker (SIGSTOP: a broker that stops answering, like one restarting) with
// two deliveries buffered, the second one's ack deadline 3 s away: both go out during the freeze,
// are acked, and end DELIVERED once the broker answers — never swept, never retried.
const FREEZE_MS = 14_000;
const kafka = plainKafka();
const registered: string[] = [];
let redis: Redis;
let buffer: ReplayBuffer;
let statuses: TopicTap<{ message_id: string; state: string; attempt: number; code: number | null }>;

async function brokerPid(): Promise<number> {
  const res = await reachCli(['ps', '--json']);
  const ps = JSON.parse(res.stdout) as { processes: Array<{ name: string; pid: number }> };
  const pid = ps.processes.find((p) => p.name === 'kafka')?.pid;
  if (!pid) throw new Error(`no broker pid in reach ps: ${res.stdout}`);
  return pid;
}

let pid: number;

beforeAll(async () => {
  // Read before the test: `reach ps` is a CLI start (1–2 s on a loaded machine), and between
  // closing the agent's socket and connecting again the test must stay within the reconnect
  // grace (2 s), or the dispatcher fails the buffered deliveries over as a lost agent's.
  pid = await brokerPid();
  redis = createRedis(stack.redisUrl, silentLogger);
  buffer = new ReplayBuffer(redis, 300);
  statuses = await statusTap<{ message_id: string; state: string; attempt: number; code: number | null }>(kafka).open();
}, 60_000);
afterAll(async () => {
  await deregisterAgents(registered);
  await statuses?.close();
  redis?.disconnect();
});

describe('a broker that stops answering while deliveries are buffered', () => {
  it('does not hold them back: sent and acked during the freeze, DELIVERED after it, unswept', async () => {
    const capability = uniqueName('frozen_orphan').replace(/-/g, '_');
    const { id, agent: first, token } = await registeredAgent(capability, 'it.frozen');
    registered.push(id);
    first.ws.close();
    await first.closed;
    const front = await storeDelivery(buffer, id, capability);
    const behind = await storeDelivery(buffer, id, capability, { deadlineInMs: 3_000 });

    process.kill(pid, 'SIGSTOP');
    let agent: TestAgent;
    try {
      ({ agent } = await TestAgent.connect(id, { token }));
      // Replayed in order while the broker is frozen, and acked (the acks are journaled).
      const delivers = await agent.waitCount((f) => f.type === 'deliver', 2, 10_000);
      expect(delivers.map((f) => f.seq)).toEqual([front.seq, behind.seq]);
      for (const f of delivers) agent.send({ type: 'ack', seq: f.seq, message_id: (f.message as { message_id: string }).message_id });
      await new Promise((r) => setTimeout(r, FREEZE_MS));
      // Taken: nothing of the agent's is left in its buffer for the sweeper.
      expect((await buffer.readAfter(id, 0, 10)).entries).toEqual([]);
    } finally {
      process.kill(pid, 'SIGCONT');
    }

    await eventually(
      'both DELIVERED',
      async () => {
        await statuses.readToEnd();
        const delivered = new Set(statuses.records.filter((r) => r.value?.state === 'DELIVERED').map((r) => r.key));
        return delivered.has(front.messageId) && delivered.has(behind.messageId);
      },
      60_000,
    );
    // Never failed nor retried, and delivered exactly once.
    const ofBehind = statuses.records.filter((r) => r.key === behind.messageId).map((r) => r.value!);
    expect(ofBehind.filter((e) => e.code === 3002 || e.attempt > 0)).toEqual([]);
    expect(agent.frames.filter((f) => f.type === 'deliver' && (f.message as { message_id: string }).message_id === behind.messageId)).toHaveLength(1);
    agent.ws.close();
  }, 180_000);
});
