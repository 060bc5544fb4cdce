import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { uniqueName } from '@reach/sdk/testing';
import { createRedis, type Redis } from '@reach/store';
import { stack } from '../../helpers/env.js';
import { plainKafka, statusTap, type TopicTap } from '../../helpers/kafka.js';
import { eventually } from '../../helpers/wait.js';
import { ReplayBuffer } from '../../../services/dispatcher/dist/replay-buffer.js';
import { DELIVERING_ALONE_AFTER_MS } from '../../../services/dispatcher/dist/sent-ledger.js';
import { deregisterAgents, registeredAgent, TestAgent } from './harness.js';
import { storeDelivery } from './stored-delivery.js';

// A delivery's DELIVERING event is produced by the instance that sent it, stamped with the send
// time: with the delivery's outcome (one produce, DELIVERING first), or alone once it has been
// unanswered for 250 ms (sent-ledger.ts). Nothing is produced before a send, so a delivery stored
// by a consumer that died before announcing it (the test plays that consumer: it appends with
// the dispatcher's own script and sends nothing) goes out with the agent's replay at once.
const kafka = plainKafka();
const registered: string[] = [];
let redis: Redis;
let buffer: ReplayBuffer;
interface Status {
  message_id: string;
  state: string;
  at: number;
  detail_json: string | null;
}
let statuses: TopicTap<Status>;

beforeAll(async () => {
  redis = createRedis(stack.redisUrl, silentLogger);
  buffer = new ReplayBuffer(redis, 300);
  statuses = await statusTap<Status>(kafka).open();
}, 60_000);
afterAll(async () => {
  await deregisterAgents(registered);
  await statuses?.close();
  redis?.disconnect();
});

/** An agent that is registered but not connected, and a delivery stored for it as a consumer would. */
async function storedWhileAway(what: string, budgetLeftMs?: number) {
  const capability = uniqueName(what).replace(/-/g, '_');
  const { id, agent, token } = await registeredAgent(capability, 'it.stored');
  registered.push(id);
  agent.ws.close();
  await agent.closed;
  return { ...(await store(id, capability, budgetLeftMs)), id, token };
}

/** Stores a delivery for `id` (its budget ending `budgetLeftMs` from now) as a consumer would, sending nothing. */
function store(id: string, capability: string, budgetLeftMs = 60_000) {
  return storeDelivery(buffer, id, capability, { budgetLeftMs });
}

const eventsOf = (messageId: string, state: string) => statuses.records.filter((r) => r.key === messageId && r.value?.state === state).map((r) => r.value!);
/** Waits until the status topic holds an event of `state` for `messageId`. */
const eventSeen = (messageId: string, state: string, what: string = state) =>
  eventually(
    what,
    async () => {
      await statuses.readToEnd();
      return eventsOf(messageId, state).length > 0;
    },
    20_000,
  );
const messageIdOf = (f: object) => ((f as { message?: unknown }).message as { message_id: string }).message_id;

describe('dispatcher: DELIVERING is written by the sender, at the send time', () => {
  it('a stored delivery is replayed at once; unanswered, its DELIVERING comes alone after 250 ms, once', async () => {
    const { id, token, messageId, appendedAt } = await storedWhileAway('stored_replay');
    // The replay can only be sent once the agent connects. Read after connect() resolved, the
    // clock was already past the send: the dispatcher writes the replay right behind its welcome
    // frame (CI, 7 December: DELIVERING stamped 8 ms before a `sentAfter` read after connect).
    const sentAfter = Date.now();
    const { agent } = await TestAgent.connect(id, { token });
    const deliver = await agent.next((f) => f.type === 'deliver' && messageIdOf(f) === messageId, 20_000);
    const receivedAt = Date.now();
    expect(receivedAt - appendedAt).toBeLessThan(20_000);
    await eventSeen(messageId, 'DELIVERING', 'its DELIVERING');
    const [delivering] = eventsOf(messageId, 'DELIVERING');
    expect(JSON.parse(delivering!.detail_json ?? '{}')).toMatchObject({ seq: deliver.seq });
    // Stamped with the send (after the connect began), not with when it was written (before).
    expect(Number(delivering!.at)).toBeGreaterThanOrEqual(sentAfter - 5);
    expect(Number(delivering!.at)).toBeGreaterThan(appendedAt);
    expect(Number(delivering!.at)).toBeLessThanOrEqual(receivedAt + 5);
    // The ack then makes it DELIVERED, with no second DELIVERING.
    agent.send({ type: 'ack', seq: deliver.seq, message_id: messageId });
    await eventSeen(messageId, 'DELIVERED');
    await new Promise((r) => setTimeout(r, 2 * DELIVERING_ALONE_AFTER_MS));
    await statuses.readToEnd();
    expect(eventsOf(messageId, 'DELIVERING')).toHaveLength(1);
    agent.ws.close();
  });

  it('a delivery acked at once gets its DELIVERING with its DELIVERED, stamped before it', async () => {
    const { id, token, messageId } = await storedWhileAway('stored_acked');
    const { agent } = await TestAgent.connect(id, { token });
    const deliver = await agent.next((f) => f.type === 'deliver' && messageIdOf(f) === messageId, 20_000);
    agent.send({ type: 'ack', seq: deliver.seq, message_id: messageId });
    await eventSeen(messageId, 'DELIVERED');
    await new Promise((r) => setTimeout(r, 2 * DELIVERING_ALONE_AFTER_MS));
    await statuses.readToEnd();
    const delivering = eventsOf(messageId, 'DELIVERING');
    const delivered = eventsOf(messageId, 'DELIVERED');
    expect(delivering).toHaveLength(1);
    expect(Number(delivering[0]!.at)).toBeLessThanOrEqual(Number(delivered[0]!.at));
    agent.ws.close();
  });

  it('a replay skips a delivery past its budget, and sends the next one', async () => {
    // Kept back by its consumer as past its budget: buffered, never announced.
    const { id, token, messageId: late } = await storedWhileAway('stored_late', 1);
    const next = await store(id, 'stored_late_next');
    const { agent } = await TestAgent.connect(id, { token });
    const deliver = await agent.next((f) => f.type === 'deliver' && messageIdOf(f) === next.messageId, 20_000);
    expect(deliver.seq).toBe(next.seq);
    expect(agent.frames.filter((f) => f.type === 'deliver').map(messageIdOf)).not.toContain(late);
    agent.ws.close();
  });
});
