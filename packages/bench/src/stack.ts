import type { Socket } from 'node:net';
import WebSocket from 'ws';
import { ackFrame, peekDeliver } from './fast-decode.js';

/**
 * What every benchmark loop does against the running stack as an outside client: register
 * agents (admin token), raise a producer's quota so the benchmark measures the pipeline and
 * not the per-producer limit (R-D7), heartbeat, connect simulated agents speaking
 * docs/design.md §4, and clean up.
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
  await forEachLimit(ids, 16, (id) =>
    fetch(`${s.registryUrl}/v1/agents/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${s.adminToken}` } }).then(
      (res) => res.body?.cancel(),
      () => undefined,
    ),
  );
}

/**
 * Waits (bounded) until every service the bench talks to answers `GET /readyz`: the shared stack
 * is restarted now and then, and a run started into a restart would measure nothing useful.
 */
export async function waitForStack(urls: readonly string[], maxMs: number, progress: (line: string) => void): Promise<void> {
  const started = Date.now();
  let said = false;
  for (;;) {
    const down: string[] = [];
    for (const url of urls) {
      const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2000) }).catch(() => undefined);
      await res?.body?.cancel();
      if (res?.status !== 200) down.push(url);
    }
    if (down.length === 0) return;
    if (Date.now() - started > maxMs)
      throw new Error(`the stack is not ready after ${Math.round(maxMs / 1000)} s: ${down.join(', ')} (is \`reach up\` running?)`);
    if (!said) progress(`waiting for the stack: ${down.join(', ')} not ready`);
    said = true;
    await new Promise((r) => setTimeout(r, 2000));
  }
}

/** How often ingress instances reload quota overrides (REACH_QUOTA_REFRESH_MS is at most 1 s). */
const QUOTA_APPLY_MS = 1_100;

/**
 * Raises a producer's quota (`PUT /v1/quotas/{agent_id}`, admin) so the benchmark is not
 * measuring the default 100 msg/s limit, and waits until every ingress instance applies it.
 * Returns a line for the report; a stack without the endpoint (404) is reported, not fatal.
 */
export async function raiseQuota(s: StackEndpoints, agentId: string, ratePerS: number, burst = Math.max(1000, Math.ceil(ratePerS))): Promise<string> {
  const res = await fetch(`${s.ingressUrl}/v1/quotas/${encodeURIComponent(agentId)}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${s.adminToken}` },
    body: JSON.stringify({ rate_per_s: ratePerS, burst }),
  }).catch((err: unknown) => err as Error);
  if (res instanceof Error) return `producer quota not raised (${res.message})`;
  if (res.status === 404) return 'producer quota not raised: this stack has no quota endpoint (no quotas applied)';
  if (!res.ok) return `producer quota not raised: ${res.status} ${await res.text()}`;
  await new Promise((r) => setTimeout(r, QUOTA_APPLY_MS));
  return `producer quota raised to ${ratePerS} msg/s`;
}

/**
 * Heartbeats every registered agent (idle load) until stopped, as the protocol asks: every
 * ttl_s / 2 (the registry's heartbeat_interval_ms), at most a few at a time.
 */
export function heartbeats(s: StackEndpoints, agents: readonly Registered[]): () => void {
  const everyMs = Math.min(...agents.map((a) => a.heartbeat_interval_ms || 20_000));
  const timer = setInterval(() => {
    void forEachLimit(agents, 16, (a) =>
      fetch(`${s.registryUrl}/v1/agents/${a.agent_id}/heartbeat`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${a.token}` },
        body: JSON.stringify({ current_load: 0, queue_length: 0, avg_latency_ms: 1, health: 1 }),
      }).then(
        (res) => void res.body?.cancel(),
        () => undefined,
      ),
    );
  }, everyMs);
  return () => clearInterval(timer);
}

/** Runs `fn` over `items` with at most `limit` calls in flight (1,000 agents must not mean 1,000 sockets at once). */
export async function forEachLimit<T>(items: readonly T[], limit: number, fn: (item: T, i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

export interface DeliverFrame {
  type: 'deliver';
  seq: number;
  message: { message_id: string; created_at: string; priority?: string; payload?: unknown };
}

/** A delivery as the socket saw it: seq and id always, the frame's text for whoever needs more. */
export type DeliverHandler = (d: { seq: number; messageId: string; text: string }, answer: () => void) => void;

/**
 * An agent's acks leave in one socket write per event-loop turn: deliveries arrive in bursts,
 * and a write (a loopback TCP send) per ack was the bench's largest single CPU cost. `_socket`
 * is ws's own field (no public cork), so without it every ack is simply written at once.
 */
function ackSender(ws: WebSocket): (frame: string) => void {
  let queued: string[] = [];
  const flush = () => {
    const frames = queued;
    queued = [];
    if (ws.readyState !== WebSocket.OPEN) return;
    const socket = (ws as unknown as { _socket?: Socket })._socket;
    socket?.cork();
    for (const f of frames) ws.send(f);
    socket?.uncork();
  };
  return (frame) => {
    if (queued.push(frame) === 1) setImmediate(flush);
  };
}

/**
 * A simulated agent speaking docs/design.md §4: hello, pong to every ping, and `onDeliver` for every
 * delivery (read with peekDeliver, JSON.parse only when the frame is laid out differently);
 * `answer` acks it (now, or when the caller's simulated work is done).
 */
export async function openAgentSocket(s: StackEndpoints, reg: Registered, onDeliver: DeliverHandler): Promise<WebSocket> {
  const ws = new WebSocket(s.wsUrl, { headers: { authorization: `Bearer ${reg.token}` } });
  const sendAck = ackSender(ws);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => ws.send(JSON.stringify({ type: 'hello', agent_id: reg.agent_id, token: reg.token })));
    ws.once('error', reject);
    ws.once('close', (code) => reject(new Error(`agent ${reg.agent_id}: socket closed (${code}) before welcome`)));
    ws.on('message', (data) => {
      const text = String(data);
      let d = peekDeliver(text);
      if (!d) {
        const frame = JSON.parse(text) as { type: string; ts?: number; seq?: number; message?: { message_id: string } };
        if (frame.type === 'welcome') return resolve();
        if (frame.type === 'ping') return ws.send(JSON.stringify({ type: 'pong', ts: frame.ts }));
        if (frame.type !== 'deliver' || !frame.message || typeof frame.seq !== 'number') return;
        d = { seq: frame.seq, messageId: frame.message.message_id };
      }
      const { seq, messageId } = d;
      onDeliver({ seq, messageId, text }, () => sendAck(ackFrame(seq, messageId)));
    });
  });
  ws.removeAllListeners('error');
  ws.on('error', () => undefined); // a socket dropped later is the run's problem, not a crash
  return ws;
}

/** openAgentSocket for callers that read the whole frame (the priority mix reads its payload). */
export function connectAgent(s: StackEndpoints, reg: Registered, onDeliver: (frame: DeliverFrame, answer: () => void) => void): Promise<WebSocket> {
  return openAgentSocket(s, reg, (d, answer) => onDeliver(JSON.parse(d.text) as DeliverFrame, answer));
}
