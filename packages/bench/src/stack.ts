import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';

/**
 * What every benchmark loop does against the running stack as an outside client: register
 * agents (admin token), raise a producer's quota so the benchmark measures the pipeline and
 * not the per-producer limit (SPEC R-D7), heartbeat, connect simulated agents speaking
 * DESIGN §4, and clean up.
 */
export interface StackEndpoints {
  registryUrl: string;
  ingressUrl: string;
  wsUrl: string;
  adminToken: string;
}

export interface Registered {
  agent_id: string;
  token: string;
  heartbeat_interval_ms: number;
}

export async function register(s: StackEndpoints, body: Record<string, unknown>): Promise<Registered> {
  const res = await fetch(`${s.registryUrl}/v1/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${s.adminToken}` },
    body: JSON.stringify(body),
  });
  if (res.status !== 201) throw new Error(`registering ${String(body.agent_id)} failed: ${res.status} ${await res.text()}`);
  return (await res.json()) as Registered;
}

export async function deregister(s: StackEndpoints, ids: readonly string[]): Promise<void> {
  await Promise.all(
    ids.map((id) =>
      fetch(`${s.registryUrl}/v1/agents/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${s.adminToken}` } }).catch(() => undefined),
    ),
  );
}

/** How often ingress instances reload quota overrides (REACH_QUOTA_REFRESH_MS is at most 1 s). */
const QUOTA_APPLY_MS = 1_100;

/**
 * Raises a producer's quota (`PUT /v1/quotas/{agent_id}`, admin) so the benchmark is not
 * measuring the default 100 msg/s limit, and waits until every ingress instance applies it.
 * Returns a line for the report; a stack without the endpoint (404) is reported, not fatal.
 */
export async function raiseQuota(s: StackEndpoints, agentId: string, ratePerS: number): Promise<string> {
  const res = await fetch(`${s.ingressUrl}/v1/quotas/${encodeURIComponent(agentId)}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${s.adminToken}` },
    body: JSON.stringify({ rate_per_s: ratePerS, burst: Math.max(1000, Math.ceil(ratePerS)) }),
  }).catch((err: unknown) => err as Error);
  if (res instanceof Error) return `producer quota not raised (${res.message})`;
  if (res.status === 404) return 'producer quota not raised: this stack has no quota endpoint (no quotas applied)';
  if (!res.ok) return `producer quota not raised: ${res.status} ${await res.text()}`;
  await new Promise((r) => setTimeout(r, QUOTA_APPLY_MS));
  return `producer quota raised to ${ratePerS} msg/s`;
}

/** Heartbeats every registered agent (idle load) until stopped. */
export function heartbeats(s: StackEndpoints, agents: readonly Registered[]): () => void {
  const timer = setInterval(() => {
    for (const a of agents) {
      void fetch(`${s.registryUrl}/v1/agents/${a.agent_id}/heartbeat`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${a.token}` },
        body: JSON.stringify({ current_load: 0, queue_length: 0, avg_latency_ms: 1, health: 1 }),
      }).catch(() => undefined);
    }
  }, 20_000);
  return () => clearInterval(timer);
}

export interface DeliverFrame {
  type: 'deliver';
  seq: number;
  message: { message_id: string; created_at: string; priority?: string; payload?: unknown };
}

/**
 * A simulated agent: hello, then `onDeliver` for every delivery; `answer` acks it (now, or when
 * the caller's simulated work is done).
 */
export async function connectAgent(s: StackEndpoints, reg: Registered, onDeliver: (frame: DeliverFrame, answer: () => void) => void): Promise<WebSocket> {
  const ws = new WebSocket(s.wsUrl, { headers: { authorization: `Bearer ${reg.token}` } });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => ws.send(JSON.stringify({ type: 'hello', agent_id: reg.agent_id, token: reg.token })));
    ws.once('error', reject);
    ws.on('message', (data) => {
      const frame = JSON.parse(String(data)) as { type: string; ts?: number; seq?: number; message?: DeliverFrame['message'] };
      if (frame.type === 'welcome') resolve();
      else if (frame.type === 'deliver' && frame.message) {
        const d = frame as DeliverFrame;
        onDeliver(d, () => {
          if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'ack', seq: d.seq, message_id: d.message.message_id }));
        });
      } else if (frame.type === 'ping') ws.send(JSON.stringify({ type: 'pong', ts: frame.ts }));
    });
  });
  return ws;
}

/** A complete Avro envelope for the ingress topic. */
export function benchEnvelope(o: {
  id: string;
  now: number;
  capability: string;
  producer: string;
  priority: string;
  payload: Buffer;
}): Record<string, unknown> {
  return {
    message_id: o.id,
    message_type: 'task_request',
    capability: o.capability,
    topic: null,
    target_agent_id: null,
    producer: o.producer,
    trace_id: randomBytes(16).toString('hex'),
    request_id: null,
    idempotency_key: null,
    session_id: null,
    correlation_id: null,
    reply_to: null,
    priority: o.priority,
    tags: [],
    retryable: true,
    timeout_ms: null,
    created_at: o.now,
    expire_at: null,
    schema_version: 1,
    content_type: 'application/json',
    payload: o.payload,
    headers: {},
  };
}
