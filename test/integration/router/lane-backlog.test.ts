import { afterEach, describe, expect, it } from 'vitest';
import { startTestAgent, stopTestAgents, testClient, uniqueName } from '@reach/sdk/testing';
import { adminToken, urls } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';
import { waitForFlow } from '../dispatcher/concurrency-harness.js';

// The routers give new work to a candidate with no deliveries waiting in the dispatcher for a
// free slot (reach:lane-backlog) while there is one. The load rate in an AgentRecord comes with
// the agent's heartbeat, seconds late: without the backlog, two equal agents each got about
// half of a burst, and the capped slow one's lane held the rest of its share for as long as it
// took to work through it (after a broker restart at 500 msg/s: 20 s, and DEAD 3005).
// Real registry, router, dispatcher, Redis and WebSockets.
const client = testClient();
const admin = { authorization: `Bearer ${adminToken()}` };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const MESSAGES = 40;

afterEach(stopTestAgents);

interface RoutedEvent {
  state: string;
  agent_id: string | null;
  detail: { candidates?: Array<{ agent_id: string; waiting?: number }> } | null;
}

async function deliveredTo(id: string): Promise<{ agent: string; routed: RoutedEvent[] }> {
  const msg = await eventually(
    `${id} DELIVERED`,
    async () => {
      const m = (await (await fetch(`${urls.ingress}/v1/messages/${id}`, { headers: admin })).json()) as { status: string; agent_id: string };
      return m.status === 'DELIVERED' ? m : undefined;
    },
    60_000,
  );
  const events = (await (await fetch(`${urls.ingress}/v1/messages/${id}/events`, { headers: admin })).json()) as { events: RoutedEvent[] };
  return { agent: msg.agent_id, routed: events.events.filter((e) => e.state === 'ROUTED') };
}

describe('routing around a lane backlog', () => {
  it('sends a stream to the agent with free slots once the other one has deliveries waiting, and says so in the routing trace', async () => {
    const capability = uniqueName('backlog').replace(/-/g, '_');
    const slow = await startTestAgent({
      descriptor: { metadata: { max_concurrency: 1 } },
      handlers: {
        [capability]: async () => {
          await sleep(1_500);
          return { slow: true };
        },
      },
    });
    const fast = await startTestAgent({ descriptor: { metadata: { max_concurrency: 64 } }, handlers: { [capability]: async () => ({ fast: true }) } });
    await waitForFlow(slow.agentId, 'the dispatcher to apply max_concurrency 1', (f) => f.max_concurrency === 1);

    const ids: string[] = [];
    for (let i = 0; i < MESSAGES; i++) {
      ids.push((await client.submit({ capability, payload: { i } })).message_id);
      await sleep(100);
    }
    const outcomes = await Promise.all(ids.map(deliveredTo));
    const toSlow = outcomes.filter((o) => o.agent === slow.agentId).length;
    expect(outcomes.filter((o) => o.agent === fast.agentId).length + toSlow).toBe(MESSAGES);
    // Half the stream (20) on a heartbeat-only score; a few while the first backlog report is
    // on its way (reported and read every 250 ms).
    expect(toSlow, `${toSlow} of ${MESSAGES} routed to the capped slow agent`).toBeLessThan(12);
    const sawWaiting = outcomes.some((o) => o.routed.some((e) => e.detail?.candidates?.some((c) => c.agent_id === slow.agentId && (c.waiting ?? 0) > 0)));
    expect(sawWaiting, 'a routing trace shows the slow agent with deliveries waiting').toBe(true);
  }, 120_000);
});
