import { afterEach, describe, expect, it } from 'vitest';
import { startTestAgent, stopTestAgents, testClient, uniqueName } from '@reach/sdk/testing';
import { adminToken, urls } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';

// A handler several times longer than its delivery's ack window (timeout_ms 1.5 s here, 10 s by
// default) runs exactly once: the SDK sends `progress` frames while it runs, each moving the
// delivery's ack deadline, so the delivery is never retried on the other, idle agent meanwhile.
const client = testClient();
const cap = (what: string) => uniqueName(`progress_${what}`).replace(/-/g, '_');
afterEach(stopTestAgents);

type Event = { state: string; attempt: number; agent_id: string | null; code: number | null };

describe('progress frames (long handlers)', () => {
  it('[long-handler-progress] a 6 s handler with a 1.5 s ack window runs once, on one agent, and ends DELIVERED at attempt 0', async () => {
    const capability = cap('long');
    const runs: string[] = [];
    const slow = async (who: string) => {
      runs.push(who);
      await new Promise((r) => setTimeout(r, 6_000));
      return { done: who };
    };
    const first = await startTestAgent({ handlers: { [capability]: () => slow('first') } });
    const second = await startTestAgent({ handlers: { [capability]: () => slow('second') } });
    const sent = await client.submit({ capability, payload: {}, timeout_ms: 1_500, headers: { 'reach-preferred-agent': first.agentId } });
    const row = await eventually(
      `${sent.message_id} DELIVERED`,
      async () => {
        const res = await fetch(`${urls.ingress}/v1/messages/${sent.message_id}`, { headers: { authorization: `Bearer ${adminToken()}` } });
        const body = (await res.json()) as { status: string; attempt: number; agent_id: string };
        return body.status === 'DELIVERED' ? body : undefined;
      },
      20_000,
    );
    expect(row).toMatchObject({ attempt: 0, agent_id: first.agentId });
    expect(runs).toEqual(['first']);
    expect(second.received).toHaveLength(0);
    const res = await fetch(`${urls.ingress}/v1/messages/${sent.message_id}/events`, { headers: { authorization: `Bearer ${adminToken()}` } });
    const { events } = (await res.json()) as { events: Event[] };
    expect(events.filter((e) => e.code !== null)).toEqual([]); // no missed deadline (3002), no retry
  });

  it('a handler still reporting progress after the budget of its message ran out is not swept DEAD: it ends DELIVERED, once', async () => {
    // created_at 26 s ago: the 30 s budget of a task_request ends ~4 s after sending, and the stuck sweep
    // (every 5 s, 2 s grace) sees the message while the 14 s handler still runs. Its agent
    // reports progress, so the sweep leaves it alone (WORK_IN_PROGRESS) and the late ack lands.
    const capability = cap('past_budget');
    const runs: string[] = [];
    const agent = await startTestAgent({
      handlers: {
        [capability]: async () => {
          runs.push('run');
          await new Promise((r) => setTimeout(r, 14_000));
          return { done: true };
        },
      },
    });
    const sent = await client.submit({ capability, payload: {}, timeout_ms: 1_500, created_at: Date.now() - 26_000 });
    const row = await eventually(
      `${sent.message_id} terminal`,
      async () => {
        const res = await fetch(`${urls.ingress}/v1/messages/${sent.message_id}`, { headers: { authorization: `Bearer ${adminToken()}` } });
        const body = (await res.json()) as { status: string; attempt: number; agent_id: string; code: number | null };
        return ['DELIVERED', 'DEAD', 'REJECTED'].includes(body.status) ? body : undefined;
      },
      30_000,
    );
    expect(row).toMatchObject({ status: 'DELIVERED', attempt: 0, agent_id: agent.agentId });
    expect(runs).toEqual(['run']);
    const res = await fetch(`${urls.ingress}/v1/messages/${sent.message_id}/events`, { headers: { authorization: `Bearer ${adminToken()}` } });
    const { events } = (await res.json()) as { events: Event[] };
    expect(events.map((e) => e.state)).not.toContain('DEAD');
  });
});
