import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { SendMessageRequest, TaskState, type Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { silentLogger } from '@reach/core';
import { createRedis, ENDED_MESSAGES, type Redis } from '@reach/store';
import { startTestAgent, stopTestAgents } from '@reach/sdk/testing';
import { adminToken, stack, urls } from '../../helpers/env.js';
import { parseMetrics } from '../../helpers/metrics.js';
import { plainKafka, registryClient } from '../../helpers/kafka.js';
import { registerProducer, type ProducerAgent } from '../ingress/producer-agent.js';
import { a2aCapability, a2aClient as a2aClientFor } from './a2a-client.js';
import { deregisterAgent, FlowRouter, Holder, registerAgent, waitForFlow } from '../dispatcher/concurrency-harness.js';
import { agentId, messageIdOf, TestAgent } from '../dispatcher/harness.js';
import { CancelMarks } from '../../../services/ingress/dist/cancel-mark.js';
import { eventually } from '../../helpers/wait.js';

// Issue #29 §1, CancelTask: a task canceled while it waits for its agent ends DEAD 3007
// (CANCELED) and its agent never gets it: in the dispatcher's lane behind max_concurrency, and
// held by the router while an SDK agent's only slot is busy. A cancel that meets the agent's ack ends in one state, the same in the
// CancelTask answer, GetTask and the timeline. Against the real stack, the A2A JS SDK the client.
const kafka = plainKafka();
const registry = registryClient();
let sender: ProducerAgent;
let producer: Producer;
let router: FlowRouter;
let redis: Redis;
const registered: string[] = [];
const marked: string[] = [];

beforeAll(async () => {
  sender = await registerProducer('a2a-cancel');
  producer = kafka.producer();
  await producer.connect();
  router = await new FlowRouter(producer, registry).init();
  redis = createRedis(stack.redisUrl, silentLogger);
});
afterEach(stopTestAgents);
afterAll(async () => {
  await Promise.all(registered.map(deregisterAgent));
  if (marked.length > 0) await redis?.zrem(ENDED_MESSAGES, ...marked);
  await producer?.disconnect();
  redis?.disconnect();
});

const cap = a2aCapability;
const a2aClient = (path = ''): Promise<Client> => a2aClientFor(sender.token, path);

/** A text message for `skill` that answers at once (SUBMITTED), not when the task ends. */
function immediate(skill: string, text: string): SendMessageRequest {
  return SendMessageRequest.fromJSON({
    message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] },
    metadata: { skill },
    configuration: { returnImmediately: true },
  });
}

function asTask(r: unknown): Task {
  const t = r as Task;
  if (!t || typeof t !== 'object' || !('status' in t)) throw new Error(`not a task: ${JSON.stringify(r)}`);
  return t;
}

function gate(): { wait: Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

interface Event {
  state: string;
  attempt: number;
  code: number | null;
}

async function timeline(messageId: string): Promise<Event[]> {
  const res = await fetch(`${urls.ingress}/v1/messages/${messageId}/events`, { headers: { authorization: `Bearer ${sender.token}` } });
  return ((await res.json()) as { events: Event[] }).events;
}

const TERMINAL = new Set(['DELIVERED', 'REJECTED', 'DEAD']);
const DONE = new Set([TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED]);

describe('A2A CancelTask of a task that waits for its agent', () => {
  it('canceled in its agent’s lane (behind max_concurrency): dropped when the slot frees, the next one gets the slot', async () => {
    // The dispatcher on its own, fed routed records directly (the router would hold the message
    // instead, its agent being saturated); the mark is the one CancelTask sets (cancel-mark.ts).
    const id = agentId('it.a2a.lane');
    const token = await registerAgent(id, 1);
    registered.push(id);
    await waitForFlow(id, 'the dispatcher to apply max_concurrency 1', (f) => f.max_concurrency === 1);
    const { agent } = await TestAgent.connect(id, { token });
    try {
      const holder = new Holder(agent);
      const envs = [0, 1, 2].map((i) => router.envelope({ payload: Buffer.from(JSON.stringify({ i })) }));
      const ids = envs.map((e) => e.message_id as string);
      await router.routeMany(id, envs);
      await waitForFlow(id, '1 in flight, 2 waiting', (f) => f.in_flight === 1 && f.waiting.NORMAL === 2);
      const first = await holder.nth(1);
      expect(messageIdOf(first)).toBe(ids[0]);

      marked.push(ids[1]!);
      expect(await new CancelMarks(redis).mark(ids[1]!)).toBe(true);
      holder.ack(first);
      const next = await holder.nth(2);
      expect(messageIdOf(next)).toBe(ids[2]);
      holder.ack(next);
      await waitForFlow(id, 'nothing in flight or waiting', (f) => f.in_flight === 0 && f.waiting.NORMAL === 0);
      expect(holder.received.map(messageIdOf)).toEqual([ids[0], ids[2]]);
    } finally {
      await agent.close();
    }
  });
  it('held by the router (its SDK agent’s only slot busy): never delivered, its hold dropped, and the next task gets the slot', async () => {
    const capability = cap('held');
    const busy = gate();
    const agent = await startTestAgent({
      // The router knows an agent's load from its heartbeats, every half lease: a 4 s lease
      // reports the busy slot (and then the free one) within 2 s. With the default 60 s lease
      // the next task waits up to 30 s for the heartbeat that shows the slot free (docs/a2a.md).
      descriptor: { metadata: { max_concurrency: 1 }, ttl_s: 4 },
      handlers: {
        [capability]: async (m) => {
          if (m.payload === 'first') await busy.wait;
          return 'done';
        },
      },
    });
    const client = await a2aClient();
    const first = asTask(await client.sendMessage(immediate(capability, 'first')));
    await eventually('the agent has the first task', () => agent.received.some((m) => m.message_id === first.id) || undefined);
    // The router holds only once a heartbeat reported the busy slot (load rate 1); before that
    // a task goes to the agent's lane, which the lane test above covers.
    await eventually(
      'the router to see the only slot busy',
      async () => {
        const r = await fetch(`${urls.router}/v1/view/agents/${agent.agentId}`, { headers: { authorization: `Bearer ${adminToken()}` } });
        return r.ok && Number(((await r.json()) as { load_rate?: number }).load_rate) >= 1 ? true : undefined;
      },
      20_000,
      100,
    );
    const holdsSkipped = await skippedHolds();
    const held = asTask(await client.sendMessage(immediate(capability, 'held')));
    await eventually(
      'the second task held (PENDING 2002)',
      async () => (await timeline(held.id)).some((e) => e.state === 'PENDING' && e.code === 2002) || undefined,
    );
    const canceled = await client.cancelTask({ tenant: '', id: held.id, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    await eventually('its hold dropped when due', async () => ((await skippedHolds()) > holdsSkipped ? true : undefined), 10_000);
    busy.open();
    const next = asTask(await client.sendMessage(immediate(capability, 'next')));
    const ended = await eventually(
      'the next task to complete',
      async () => {
        const t = await client.getTask({ tenant: '', id: next.id, historyLength: undefined });
        return t.status && DONE.has(t.status.state) ? t : undefined;
      },
      30_000,
    );
    expect(ended.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(agent.received.map((m) => m.message_id)).toEqual([first.id, next.id]);
    const events = await timeline(held.id);
    expect(events.find((e) => TERMINAL.has(e.state))).toMatchObject({ state: 'DEAD', code: 3007 });
    expect(events.map((e) => e.state)).not.toContain('DELIVERED');
  }, 90_000);
});

/** Holds the retry-scheduler dropped because their message had ended (canceled, or DEAD). */
async function skippedHolds(): Promise<number> {
  const text = await (await fetch(`${urls.retryScheduler}/metrics`)).text();
  return parseMetrics(text)
    .samples.filter((s) => s.name === 'reach_retry_scheduler_skipped_total' && s.labels.kind === 'hold')
    .reduce((n, s) => n + s.value, 0);
}

describe('A2A CancelTask racing the agent’s ack', () => {
  it('ends in one state: CANCELED and never delivered, or delivered and the cancel refused — the same in the answer, GetTask and the timeline', async () => {
    const capability = cap('race');
    const gates = new Map<string, ReturnType<typeof gate>>();
    const agent = await startTestAgent({
      handlers: {
        [capability]: async (m) => {
          await gates.get(String(m.payload))!.wait;
          return 'done';
        },
      },
    });
    const client = await a2aClient();
    const outcomes: string[] = [];
    for (let i = 0; i < 8; i++) {
      const key = `race-${i}`;
      const g = gate();
      gates.set(key, g);
      const task = asTask(await client.sendMessage(immediate(capability, key)));
      await eventually('the agent has it', async () => (agent.received.some((m) => m.message_id === task.id) ? true : undefined));
      // The handler returns (its result and ack go out) as the cancel comes in.
      g.open();
      const answer = await client.cancelTask({ tenant: '', id: task.id, metadata: undefined }).then(
        (t) => ({ canceled: t }),
        (e: unknown) => ({ refused: e as Error }),
      );
      const final = await eventually('the task ended', async () => {
        const t = await client.getTask({ tenant: '', id: task.id, historyLength: undefined });
        return t.status && DONE.has(t.status.state) ? t : undefined;
      });
      const events = await timeline(task.id);
      const firstTerminal = events.find((e) => TERMINAL.has(e.state));
      if ('canceled' in answer) {
        expect(answer.canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
        expect(final.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
        expect(firstTerminal).toMatchObject({ state: 'DEAD', code: 3007 });
        expect(events.map((e) => e.state)).not.toContain('DELIVERED');
        outcomes.push('canceled');
      } else {
        expect(answer.refused.message).toMatch(/can no longer be canceled/);
        expect(final.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
        expect(firstTerminal?.state).toBe('DELIVERED');
        outcomes.push('delivered');
      }
    }
    expect(outcomes).toHaveLength(8);
  }, 120_000);
});
