import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { uniqueName } from '@reach/sdk/testing';
import { createRedis, type Redis } from '@reach/store';
import { stack } from '../../helpers/env.js';
import { plainKafka, statusTap, type TopicTap } from '../../helpers/kafka.js';
import { ReplayBuffer } from '../../../services/dispatcher/dist/replay-buffer.js';
import { ORPHAN_AFTER_MS } from '../../../services/dispatcher/dist/orphans.js';
import { deregisterAgents, registeredAgent, TestAgent } from './harness.js';
import { storeDelivery } from './stored-delivery.js';

// A dispatcher killed between storing a batch in the replay buffer and producing its DELIVERING
// events leaves orphans: entries no DELIVERING was written for. Sent by the agent's replay, an
// ack made them DELIVERED before DELIVERING (`pnpm chaos`: illegal transitions after dispatcher
// kills). The test plays the killed consumer: it appends with the dispatcher's own script (which
// marks the entry unreleased) and produces nothing; the running dispatcher's replay must hold
// the entry back while it is young, then write its DELIVERING itself and only then send it.
const kafka = plainKafka();
const registered: string[] = [];
let redis: Redis;
let buffer: ReplayBuffer;
let statuses: TopicTap<{ message_id: string; state: string; detail_json: string | null }>;

beforeAll(async () => {
  redis = createRedis(stack.redisUrl, silentLogger);
  buffer = new ReplayBuffer(redis, 300);
  statuses = await statusTap<{ message_id: string; state: string; detail_json: string | null }>(kafka).open();
}, 60_000);
afterAll(async () => {
  await deregisterAgents(registered);
  await statuses?.close();
  redis?.disconnect();
});

/** An agent that is registered but not connected, and a delivery stored for it as a consumer would. */
async function storedWhileAway(what: string, budgetLeftMs?: number) {
  const capability = uniqueName(what).replace(/-/g, '_');
  const { id, agent, token } = await registeredAgent(capability, 'it.orphan');
  registered.push(id);
  agent.ws.close();
  await agent.closed;
  return { ...(await store(id, capability, budgetLeftMs)), id, token };
}

/** Stores a delivery for `id` (its budget ending `budgetLeftMs` from now) as a consumer would, producing nothing. */
function store(id: string, capability: string, budgetLeftMs = 60_000) {
  return storeDelivery(buffer, id, capability, { budgetLeftMs });
}

const deliveringOf = (messageId: string) => statuses.records.filter((r) => r.key === messageId && r.value?.state === 'DELIVERING');

describe('dispatcher: deliveries whose DELIVERING was never produced (orphans)', () => {
  it('are marked unreleased by the append, and released ones are not', async () => {
    const { id, seq } = await storedWhileAway('orphan_mark');
    const read = await buffer.readAfter(id, seq - 1, 10);
    expect(read.entries.map((e) => e.seq)).toEqual([seq]);
    expect([...read.unreleased.keys()]).toEqual([seq]);
    await buffer.release([{ agent: id, seq }]);
    expect((await buffer.readAfter(id, seq - 1, 10)).unreleased.size).toBe(0);
  });

  it('a replay holds an orphan back while it is young, then produces its DELIVERING and only then sends it', async () => {
    const { id, token, messageId, appendedAt } = await storedWhileAway('orphan_replay');
    const { agent } = await TestAgent.connect(id, { token });
    const deliver = await agent.next((f) => f.type === 'deliver' && (f.message as { message_id: string }).message_id === messageId, 20_000);
    const receivedAt = Date.now();
    // Not sent while it could still be on its consumer's way…
    expect(receivedAt - appendedAt).toBeGreaterThanOrEqual(ORPHAN_AFTER_MS);
    // …and its DELIVERING was written (acks=-1) before the frame went out.
    await statuses.readToEnd();
    const events = deliveringOf(messageId);
    expect(events).toHaveLength(1);
    expect(JSON.parse(events[0]!.value?.detail_json ?? '{}')).toMatchObject({ seq: deliver.seq, orphaned: true });
    // Released now: the next pump does not produce it again.
    expect((await buffer.readAfter(id, (deliver.seq as number) - 1, 10)).unreleased.size).toBe(0);
    agent.ws.close();
  });

  it('a released entry is replayed at once, with no second DELIVERING', async () => {
    const { id, token, messageId, seq } = await storedWhileAway('orphan_released');
    await buffer.release([{ agent: id, seq }]);
    const { agent } = await TestAgent.connect(id, { token });
    await agent.next((f) => f.type === 'deliver' && (f.message as { message_id: string }).message_id === messageId, 20_000);
    await statuses.readToEnd();
    expect(deliveringOf(messageId)).toHaveLength(0);
    agent.ws.close();
  });

  it('a replay skips a released delivery past its budget, and sends the next one', async () => {
    // Kept back by its consumer as past its budget: buffered and released, never announced.
    const { id, token, seq, messageId: late } = await storedWhileAway('orphan_late', 1);
    const next = await store(id, 'orphan_late_next');
    await buffer.release([
      { agent: id, seq },
      { agent: id, seq: next.seq },
    ]);
    const { agent } = await TestAgent.connect(id, { token });
    const deliver = await agent.next((f) => f.type === 'deliver' && (f.message as { message_id: string }).message_id === next.messageId, 20_000);
    expect(deliver.seq).toBe(next.seq);
    expect(agent.frames.filter((f) => f.type === 'deliver').map((f) => (f.message as { message_id: string }).message_id)).not.toContain(late);
    agent.ws.close();
  });
});
