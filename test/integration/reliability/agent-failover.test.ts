import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startTestAgent, stopTestAgents, testClient, uniqueName } from '@reach/sdk/testing';
import { adminToken, urls } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';
import { deregisterAgents, registeredAgent } from '../dispatcher/harness.js';

// An agent whose socket dies with deliveries un-acked: after the reconnect grace
// (REACH_WS_RECONNECT_GRACE_MS, 2 s) they fail over to another candidate as failed attempts with
// 1002 CONNECTION_CLOSED — not when their 10 s ack deadline runs out (3002). (Reconnecting
// within the grace replays them instead, as test/integration/dispatcher/delivery.test.ts covers
// for reconnects; a test racing the grace itself flaked on a loaded CI machine.) Real
// registry, router, dispatcher, WebSockets.
const client = testClient();
const cap = (what: string) => uniqueName(`failover_${what}`).replace(/-/g, '_');
const admin = { authorization: `Bearer ${adminToken()}` };
const registered: string[] = [];

afterEach(stopTestAgents);
afterAll(async () => {
  await deregisterAgents(registered);
});

type Event = { state: string; attempt: number; agent_id: string | null; code: number | null };
async function timeline(id: string): Promise<{ status: string; agent_id: string | null; events: Event[] }> {
  const [msg, ev] = await Promise.all([
    fetch(`${urls.ingress}/v1/messages/${id}`, { headers: admin }).then((r) => r.json() as Promise<{ status: string; agent_id: string | null }>),
    fetch(`${urls.ingress}/v1/messages/${id}/events`, { headers: admin }).then((r) => r.json() as Promise<{ events: Event[] }>),
  ]);
  return { ...msg, events: ev.events };
}

async function sendTo(victim: string, capability: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await client.submit({ capability, payload: { i }, headers: { 'reach-preferred-agent': victim } })).message_id);
  return ids;
}

describe('a dead agent socket (R-C12: traffic on the other agents within 3 s)', () => {
  it('fails its un-acked deliveries over to another candidate with 1002 once the grace passes, long before the ack deadline', async () => {
    const capability = cap('dead');
    const survivor = await startTestAgent({ handlers: { [capability]: async () => ({ ok: true }) } });
    const victim = await registeredAgent(capability, 'it.failover.victim');
    registered.push(victim.id);
    const ids = await sendTo(victim.id, capability, 5);
    await victim.agent.waitCount((f) => f.type === 'deliver', 5);
    victim.agent.ws.terminate(); // no close frame, no ack: the process died
    for (const id of ids) {
      const t = await eventually(`${id} DELIVERED`, async () => {
        const now = await timeline(id);
        return now.status === 'DELIVERED' ? now : undefined;
      });
      expect(t.agent_id).toBe(survivor.agentId);
      // The victim's attempt failed because its connection was lost, not by its ack deadline.
      const failed = t.events.filter((e) => e.agent_id === victim.id && e.code !== null);
      expect(failed.map((e) => e.code)).toContain(1002);
      expect(failed.map((e) => e.code)).not.toContain(3002);
    }
  });
});
