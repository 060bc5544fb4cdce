import { afterEach, describe, expect, it } from 'vitest';
import type { ReachMessage } from '@reach/sdk';
import { startTestAgent, stopTestAgents, testClient, uniqueName } from '@reach/sdk/testing';
import { adminToken, urls } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';

// Routers know an agent's load only from its heartbeats, which come every half lease (30 s with
// the default 60 s lease). A task for an agent whose only slot is busy is held by the router
// (PENDING 2002) until the router sees the slot free. Before, that took the next regular
// heartbeat: a held task waited up to 30 s after the slot freed (29.9 s measured). The node now
// beats as soon as its load crosses the busy line (packages/sdk/src/early-beat.ts), so the
// router sees the slot busy at once, and free again at once. The windows below are a third of
// the regular heartbeat's interval: only an early heartbeat fits in them.

const cap = (verb: string) => `${verb}_${uniqueName('t').replace(/[^a-z0-9]/g, '')}`;
const EARLY_WITHIN_MS = 10_000;

afterEach(stopTestAgents);

function gate(): { wait: Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

async function routerLoadRate(agentId: string): Promise<number | undefined> {
  const r = await fetch(`${urls.router}/v1/view/agents/${agentId}`, { headers: { authorization: `Bearer ${adminToken()}` } });
  return r.ok ? Number(((await r.json()) as { load_rate?: number }).load_rate) : undefined;
}

describe('a full agent with the default lease', () => {
  it('gets the task held for it as soon as its only slot frees, not at its next regular heartbeat', async () => {
    const capability = cap('busy');
    const busy = gate();
    const agent = await startTestAgent({
      descriptor: { metadata: { max_concurrency: 1 } },
      handlers: {
        [capability]: async (m: ReachMessage) => {
          if (m.payload === 'first') await busy.wait;
          return 'done';
        },
      },
    });
    const client = testClient();
    const first = await client.submit({ capability, payload: 'first' });
    await eventually('the handler to hold the only slot', () => agent.received.some((m) => m.message_id === first.message_id) || undefined);
    await eventually('the router to see the slot busy', async () => ((await routerLoadRate(agent.agentId)) === 1 ? true : undefined), EARLY_WITHIN_MS, 100);

    const held = await client.submit({ capability, payload: 'held' });
    await eventually(
      'the task held for the busy agent (PENDING 2002)',
      async () => (await client.events(held.message_id)).some((e) => e.state === 'PENDING' && e.code === 2002) || undefined,
    );
    busy.open();
    const delivered = await eventually(
      'the held task delivered after the slot freed',
      async () => {
        const s = await client.status(held.message_id);
        return s.status === 'DELIVERED' ? s : undefined;
      },
      EARLY_WITHIN_MS,
      100,
    );
    expect(delivered).toMatchObject({ status: 'DELIVERED', agent_id: agent.agentId });
    expect(agent.received.map((m) => m.payload)).toEqual(['first', 'held']);
  }, 60_000);
});
