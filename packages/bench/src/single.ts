import { randomBytes } from 'node:crypto';
import type WebSocket from 'ws';
import type { LatencySummary } from './results.js';
import { Samples } from './stats.js';
import { deregister, heartbeats, openAgentSocket, register, type Registered, type StackEndpoints } from './stack.js';

/**
 * `--single N`: one message at a time on an idle stack (issue 27's "one message at idle"). An
 * agent that acks at once; N messages submitted over HTTP one after the other, the next only once
 * this one is DELIVERED, a pause between them so each
 * meets an idle pipeline. Measured per message from the read model: DELIVERED − created_at (the
 * ack's time minus the acceptance's, both stamped by the stack), and each stage's share from the
 * timeline; the HTTP round trip the client saw beside it.
 */
export interface SingleResult {
  messages: number;
  /** DELIVERED's `updated_at` − `created_at` from the read model. */
  delivered: LatencySummary;
  /** POST until the client reads DELIVERED (polled every POLL_MS), as the client saw it. */
  roundTrip: LatencySummary;
  /** p50 of each hop of the timeline: PENDING → ROUTED, ROUTED → DELIVERING, DELIVERING → DELIVERED. */
  hopsP50: Record<string, number>;
  notDelivered: number;
}

const WARM_UP = 5;
const PAUSE_MS = 50;
const POLL_MS = 2;
const TERMINAL = new Set(['DELIVERED', 'REJECTED', 'DEAD']);
const HOPS = [
  ['PENDING', 'ROUTED'],
  ['ROUTED', 'DELIVERING'],
  ['DELIVERING', 'DELIVERED'],
] as const;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function json(res: Response): Promise<Record<string, unknown>> {
  const text = await res.text();
  if (!res.ok) throw new Error(`${res.status} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

export async function measureSingle(s: StackEndpoints, o: { messages: number; progress: (line: string) => void }): Promise<SingleResult> {
  const run = randomBytes(3).toString('hex');
  const capability = `bench_single_${run}`;
  const auth = { authorization: `Bearer ${s.adminToken}` };
  let agent: Registered | undefined;
  let socket: WebSocket | undefined;
  let stopHeartbeats = () => undefined as void;
  try {
    agent = await register(s, {
      agent_id: `bench.single.${run}`,
      agent_type: 'bench',
      endpoints: { ws: s.wsUrl },
      capabilities: [{ name: capability, mode: 'handle' }],
      metadata: { max_concurrency: 1, domain: 'default' },
      ttl_s: 60,
    });
    socket = await openAgentSocket(s, agent, (_d, answer) => answer());
    stopHeartbeats = heartbeats(s, [agent]);
    // Submitted without ?wait_ms (that waits for a result; this agent only acks), then read
    // every POLL_MS until DELIVERED: the read model's stamps are the figure, the poll only
    // bounds the client's round trip.
    const submit = async (i: number) => {
      const started = performance.now();
      const res = await fetch(`${s.ingressUrl}/v1/messages`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ capability, payload: { i } }),
      });
      const id = String((await json(res)).message_id);
      for (;;) {
        const row = await fetch(`${s.ingressUrl}/v1/messages/${id}`, { headers: auth });
        const status = row.status === 200 ? String((await json(row)).status) : (await row.body?.cancel(), 'PENDING');
        const ms = performance.now() - started;
        if (TERMINAL.has(status) || ms > 5_000) return { id, status, ms };
        await sleep(POLL_MS);
      }
    };
    // Until the router's and the dispatcher's views have the agent: the first few find no route.
    o.progress(`  single: waiting for the agent to be routable, then ${WARM_UP} warm-up messages`);
    for (let tries = 0; (await submit(-1)).status !== 'DELIVERED'; tries++) {
      if (tries > 50) throw new Error('the bench agent never got a message DELIVERED');
      await sleep(200);
    }
    for (let i = 0; i < WARM_UP; i++) await submit(-1);

    o.progress(`  single: ${o.messages} messages, one at a time, ${PAUSE_MS} ms apart`);
    const delivered = new Samples();
    const roundTrip = new Samples();
    const hops = HOPS.map(() => new Samples());
    let notDelivered = 0;
    for (let i = 0; i < o.messages; i++) {
      await sleep(PAUSE_MS);
      const sent = await submit(i);
      if (sent.status !== 'DELIVERED') {
        notDelivered++;
        continue;
      }
      roundTrip.add(sent.ms);
      const row = await json(await fetch(`${s.ingressUrl}/v1/messages/${sent.id}`, { headers: auth }));
      delivered.add(Date.parse(String(row.updated_at)) - Date.parse(String(row.created_at)));
      const { events } = (await json(await fetch(`${s.ingressUrl}/v1/messages/${sent.id}/events`, { headers: auth }))) as unknown as {
        events: Array<{ state: string; at: string }>;
      };
      const at = new Map(events.map((e) => [e.state, Date.parse(e.at)]));
      HOPS.forEach(([from, to], h) => {
        const a = at.get(from);
        const b = at.get(to);
        if (a !== undefined && b !== undefined) hops[h]!.add(b - a);
      });
    }
    return {
      messages: o.messages,
      delivered: delivered.summary(),
      roundTrip: roundTrip.summary(),
      hopsP50: Object.fromEntries(HOPS.map(([from, to], h) => [`${from} → ${to}`, hops[h]!.summary().p50])),
      notDelivered,
    };
  } finally {
    stopHeartbeats();
    socket?.close();
    if (agent) await deregister(s, [agent.agent_id]);
  }
}
