import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { startTestAgent, stopTestAgents } from '@reach/sdk/testing';
import { plainKafka, registryClient } from '../../helpers/kafka.js';
import { sendStatus, statusEvent } from '../../helpers/status-event.js';
import { api, cap, entriesOf, entry, envelope, eventually, message, sendDeadLetter } from './dlq-helpers.js';

// Issue #25 item 3: a replay is a new delivery attempt chain with a budget of its own, and it
// always ends in a terminal state. Before, a replay kept the original created_at, so a dead
// letter older than its budget (30 s for task_request) was declared DEAD 3005 again within a
// second and wrote a new dead letter, and one the stuck sweep had declared DEAD stayed
// non-terminal (its agent's answer was refused as "already declared DEAD").
const TASK_REQUEST_BUDGET_MS = 30_000; // REACH_BUDGET_POLICY default
let producer: Producer;

beforeAll(async () => {
  producer = plainKafka().producer();
  await producer.connect();
});
afterEach(stopTestAgents);
afterAll(async () => {
  await producer.disconnect();
});

interface Replayed {
  dlq_id: string;
  message_id: string;
  attempt: number;
}

describe('replaying a dead letter older than its budget (issue #25 item 3)', () => {
  it('gets a fresh budget: the healthy agent handles it, DELIVERED, and no new dead letter is written', async () => {
    const capability = cap('old');
    const agent = await startTestAgent({ handlers: { [capability]: async () => ({ ok: true }) } });
    // A message created two budgets ago that its (then broken) agent rejected.
    const env = envelope(capability, { created_at: Date.now() - 4 * TASK_REQUEST_BUDGET_MS });
    const messageId = String(env.message_id);
    const id = await sendDeadLetter(producer, env, 'REJECTED', 3003, 1);
    await eventually('stored', () => entry(id));

    const r = await api<Replayed>('POST', `/v1/dlq/${id}/replay`);
    expect(r.status).toBe(200);
    const done = await eventually(
      'a terminal state',
      async () => {
        const m = await message(messageId);
        return m && ['DELIVERED', 'REJECTED', 'DEAD'].includes(m.status) ? m : undefined;
      },
      20_000,
    );
    expect(done).toMatchObject({ status: 'DELIVERED', agent_id: agent.agentId, attempt: r.body.attempt });
    expect(agent.received.map((m) => m.message_id)).toContain(messageId);
    // the original entry, replayed once; no second dead letter of the replay
    const entries = await entriesOf(capability);
    expect(entries.map((e) => [e.dlq_id, e.status])).toEqual([[id, 'REPLAYED']]);
  });

  it('a message the stuck sweep declared DEAD 3005, replayed, reaches its agent and ends DELIVERED', async () => {
    const capability = cap('swept');
    // A lone PENDING whose budget ended long ago: the stuck sweep declares it DEAD 3005 with a
    // BUDGET_EXCEEDED dead letter (and marks it, so that a late answer of that chain is refused).
    const lone = statusEvent({ state: 'PENDING', createdAt: Date.now() - 4 * TASK_REQUEST_BUDGET_MS, capability });
    await sendStatus(producer, registryClient(), lone);
    const messageId = lone.message_id;
    const dead = await eventually(
      'the BUDGET_EXCEEDED dead letter of the sweep',
      async () => (await entriesOf(capability, 'BUDGET_EXCEEDED')).find((e) => e.message_id === messageId),
      40_000,
    );
    expect((await message(messageId))?.status).toBe('DEAD');

    const agent = await startTestAgent({ handlers: { [capability]: async () => ({ ok: true }) } });
    const r = await api<Replayed>('POST', `/v1/dlq/${dead.dlq_id}/replay`);
    expect(r.status).toBe(200);
    const done = await eventually(
      'DELIVERED',
      async () => {
        const m = await message(messageId);
        return m && m.attempt === r.body.attempt && ['DELIVERED', 'REJECTED', 'DEAD'].includes(m.status) ? m : undefined;
      },
      20_000,
    );
    expect(done).toMatchObject({ status: 'DELIVERED', agent_id: agent.agentId });
    expect(agent.received.map((m) => m.message_id)).toContain(messageId);
    expect((await entriesOf(capability)).map((e) => e.dlq_id)).toEqual([dead.dlq_id]);
  });
});
