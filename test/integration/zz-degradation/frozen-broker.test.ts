import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { uniqueName } from '@reach/sdk/testing';
import { createRedis, type Redis } from '@reach/store';
import { stack } from '../../helpers/env.js';
import { reachCli } from '../../helpers/cli.js';
import { plainKafka, statusTap, type TopicTap } from '../../helpers/kafka.js';
import { eventually } from '../../helpers/wait.js';
import { ReplayBuffer, deadlineMember, keys } from '../../../services/dispatcher/dist/replay-buffer.js';
import { deregisterAgents, registeredAgent, TestAgent } from '../dispatcher/harness.js';
import { storeDelivery } from '../dispatcher/stored-delivery.js';

// A connection sends its agent's buffer in seq order. An entry left unreleased (its DELIVERING
// not written) is released by the pump itself after ORPHAN_AFTER_MS, which produces that event:
// while the broker does not answer, that produce waits, and the released entries behind it wait
// too. Their ack deadlines used to run meanwhile: the sweeper failed them (3002, retried
// elsewhere), and when the broker came back the pump sent them anyway from the read it made
// before the wait — the task ran on two agents (`pnpm chaos --via kafka --faults
// kill-kafka,kill-dispatcher --rate 500`: 31 tasks run twice). The test freezes the broker
// (SIGSTOP: a broker that stops answering, like one restarting) with such a pair buffered.
// Longer than the ack window (10 s): the first pump pass, which stops at the young orphan,
// already gives the entry behind it a window from then (renewedAtSend).
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

describe('a broker that stops answering while a pump releases an orphan', () => {
  it('holds the ack deadline of the released delivery behind it, and sends that delivery once, unswept', async () => {
    const capability = uniqueName('frozen_orphan').replace(/-/g, '_');
    const { id, agent: first, token } = await registeredAgent(capability, 'it.frozen');
    registered.push(id);
    first.ws.close();
    await first.closed;
    // An orphan (unreleased), and behind it a released delivery whose ack deadline is 3 s away.
    const orphan = await storeDelivery(buffer, id, capability);
    const behind = await storeDelivery(buffer, id, capability, { deadlineInMs: 3_000 });
    await buffer.release([{ agent: id, seq: behind.seq }]);

    process.kill(pid, 'SIGSTOP');
    let agent: TestAgent;
    try {
      ({ agent } = await TestAgent.connect(id, { token }));
      await new Promise((r) => setTimeout(r, FREEZE_MS));
      // Its deadline is long past: still buffered means the sweeper left it alone.
      const read = await buffer.readAfter(id, behind.seq - 1, 1);
      expect(read.entries.map((e) => e.seq)).toEqual([behind.seq]);
      // Held: its deadline moved past the freeze (it was 3 s after the append).
      const deadline = Number(await redis.zscore(keys.deadlines, deadlineMember(id, behind.seq)));
      expect(deadline).toBeGreaterThan(Date.now());
      expect(agent.frames.filter((f) => f.type === 'deliver')).toHaveLength(0);
    } finally {
      process.kill(pid, 'SIGCONT');
    }

    // Once the broker answers: the orphan's DELIVERING is written, both go out in order.
    const delivers = await agent.waitCount((f) => f.type === 'deliver', 2, 60_000);
    expect(delivers.map((f) => f.seq)).toEqual([orphan.seq, behind.seq]);
    for (const f of delivers) agent.send({ type: 'ack', seq: f.seq, message_id: (f.message as { message_id: string }).message_id });
    await eventually(
      'both DELIVERED',
      async () => {
        await statuses.readToEnd();
        const delivered = new Set(statuses.records.filter((r) => r.value?.state === 'DELIVERED').map((r) => r.key));
        return delivered.has(orphan.messageId) && delivered.has(behind.messageId);
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
