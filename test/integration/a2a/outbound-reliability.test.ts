import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { testClient } from '@reach/sdk/testing';
import { reachCli } from '../../helpers/cli.js';
import { adminToken, uniq, urls } from '../../helpers/env.js';
import { eventually as waitFor } from '../../helpers/wait.js';

// Issue #29 §2: the reliability A2A lacks, for an A2A agent reached through Agent-Reach. The
// agent here is a bare HTTP server speaking A2A 1.0 JSON-RPC (its card, GetTask for the
// registry's probes, SendMessage) that fails the way agents do: HTTP 503, a JSON-RPC internal
// error, no answer at all. The dispatcher retries the same message (same messageId) with
// backoff until it completes; one that never answers right ends DEAD in the DLQ with every
// attempt, and its sender is told. Nothing is lost, nothing is done twice.

type Mode = 'http-503' | 'rpc-internal' | 'hang' | 'complete' | 'working';

interface FlakyAgent {
  cardUrl: string;
  /** The SendMessage calls received, in order: the A2A messageId and the mode answered. */
  calls: Array<{ messageId: string; mode: Mode }>;
  /** Tasks answered WORKING whose COMPLETED no GetTask has reported yet (the agent's work in hand). */
  open: Set<string>;
  /** The most tasks in hand at once. */
  maxOpen: number;
  /** Lets the WORKING task of the n-th call (0-based) complete: the next GetTask reports it COMPLETED. */
  finish(n: number): void;
  close(): Promise<void>;
}

/** An A2A agent answering its n-th SendMessage as `modeOf(n)` says (0-based). */
async function startFlakyAgent(skill: string, modeOf: (n: number) => Mode): Promise<FlakyAgent> {
  const calls: FlakyAgent['calls'] = [];
  const open = new Set<string>();
  const finished = new Set<string>();
  let maxOpen = 0;
  let base = '';
  const completedTask = (id: string, parts: unknown) => ({
    id,
    contextId: 'ctx',
    status: { state: 'TASK_STATE_COMPLETED', timestamp: new Date().toISOString() },
    artifacts: [{ artifactId: 'a1', parts: [{ data: { answered: parts } }] }],
  });
  const card = () => ({
    name: `Flaky agent ${skill}`,
    description: 'Fails on purpose (issue #29 outbound reliability test).',
    supportedInterfaces: [{ url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
    version: '1.0.0',
    capabilities: { streaming: false, pushNotifications: false },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['application/json'],
    skills: [{ id: skill, name: skill, description: 'Answers when it feels like it', tags: ['flaky'] }],
  });
  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json', 'a2a-version': '1.0' });
    res.end(JSON.stringify(body));
  };
  const read = async (req: IncomingMessage): Promise<{ id: unknown; method: string; params: { message?: { messageId: string; parts: unknown[] } } }> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as never;
  };
  const server: Server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/.well-known/agent-card.json') return json(res, 200, card());
    if (req.method !== 'POST' || req.url !== '/a2a/jsonrpc') return json(res, 404, { error: 'not found' });
    void read(req).then((call) => {
      if (call.method === 'GetTask') {
        // The dispatcher polling a WORKING task; anything else is the registry's probe (any
        // JSON-RPC answer means alive: a task nobody has, -32001).
        const id = (call.params as { id?: string }).id ?? '';
        if (!open.has(id) && !finished.has(id)) return json(res, 200, { jsonrpc: '2.0', id: call.id, error: { code: -32001, message: 'Task not found' } });
        if (!finished.has(id))
          return json(res, 200, { jsonrpc: '2.0', id: call.id, result: { id, contextId: 'ctx', status: { state: 'TASK_STATE_WORKING' } } });
        open.delete(id);
        return json(res, 200, { jsonrpc: '2.0', id: call.id, result: completedTask(id, 'finished') });
      }
      if (call.method !== 'SendMessage') return json(res, 200, { jsonrpc: '2.0', id: call.id, error: { code: -32601, message: 'Method not found' } });
      const mode = modeOf(calls.length);
      calls.push({ messageId: call.params.message!.messageId, mode });
      switch (mode) {
        case 'http-503':
          return json(res, 503, { error: 'overloaded' });
        case 'rpc-internal':
          return json(res, 200, { jsonrpc: '2.0', id: call.id, error: { code: -32603, message: 'Internal error' } });
        case 'hang':
          return; // no answer: the delivery's ack deadline passes
        case 'complete':
          return json(res, 200, { jsonrpc: '2.0', id: call.id, result: { task: completedTask(`task-${calls.length}`, call.params.message!.parts) } });
        case 'working': {
          const id = `task-${calls.length - 1}`;
          open.add(id);
          maxOpen = Math.max(maxOpen, open.size);
          return json(res, 200, { jsonrpc: '2.0', id: call.id, result: { task: { id, contextId: 'ctx', status: { state: 'TASK_STATE_WORKING' } } } });
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    cardUrl: `${base}/.well-known/agent-card.json`,
    calls,
    open,
    get maxOpen() {
      return maxOpen;
    },
    finish: (n) => finished.add(`task-${n}`),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const agents: FlakyAgent[] = [];
const imported: string[] = [];

afterEach(async () => {
  for (const a of agents.splice(0)) await a.close();
  for (const id of imported.splice(0))
    await fetch(`${urls.registry}/v1/agents/${encodeURIComponent(id)}`, { method: 'DELETE', headers: { authorization: `Bearer ${adminToken()}` } });
});

async function importAgent(agent: FlakyAgent, extra: string[] = []): Promise<void> {
  const r = await reachCli(['agents', 'import-a2a', agent.cardUrl, '--agent-id', uniq('a2a.flaky'), ...extra, '--json']);
  expect(r.code, r.stderr).toBe(0);
  imported.push((JSON.parse(r.stdout) as { agent_id: string }).agent_id);
}

interface Event {
  state: string;
  attempt: number;
  code: number | null;
  service: string;
  detail: Record<string, unknown> | null;
}

async function timeline(id: string): Promise<Event[]> {
  const res = await fetch(`${urls.ingress}/v1/messages/${id}/events`, { headers: { authorization: `Bearer ${adminToken()}` } });
  return ((await res.json()) as { events: Event[] }).events;
}

/** The dispatcher's retry decisions: the PENDING that opens each next attempt, with its backoff. */
function retriesOf(events: Event[]): Array<{ attempt: number; code: number | null; delayMs: number }> {
  return events
    .filter((e) => e.state === 'PENDING' && e.service === 'dispatcher')
    .map((e) => ({ attempt: e.attempt, code: e.code, delayMs: Number(e.detail?.delay_ms) }))
    .sort((a, b) => a.attempt - b.attempt);
}

const capabilityOf = (skill: string) => skill.replace(/-/g, '_');

/** The shared poll, with this file's longer default wait. */
const eventually = <T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> => waitFor(what, check, timeoutMs);
// Each attempt gets this long to be answered (the message's timeout_ms is its ack window).
const TIMEOUT_MS = 3_000;

describe('A2A outbound reliability: an A2A agent that fails', () => {
  it('is retried with backoff — HTTP 503, a JSON-RPC internal error, no answer — until it answers: the task completes, the same message each time', async () => {
    const skill = uniq('a2a-flaky');
    const order: Mode[] = ['http-503', 'rpc-internal', 'hang', 'complete'];
    const agent = await startFlakyAgent(skill, (n) => order[Math.min(n, order.length - 1)]!);
    agents.push(agent);
    await importAgent(agent);

    // timeout_ms also bounds how long a submit may wait: the test follows the message instead.
    const sent = await testClient().submit({ capability: capabilityOf(skill), payload: 'try hard', timeout_ms: TIMEOUT_MS });
    const done = await eventually('the message delivered', async () => {
      const m = (await (await fetch(`${urls.ingress}/v1/messages/${sent.message_id}`, { headers: { authorization: `Bearer ${adminToken()}` } })).json()) as {
        message_id: string;
        status: string;
        result?: unknown;
      };
      return m.status === 'DELIVERED' ? m : undefined;
    });
    expect(done.result).toEqual({ status: 'ok', payload: { answered: [{ text: 'try hard' }] } });
    // Every attempt was the same A2A message (messageId = the message id), and none after the answer.
    expect(agent.calls).toEqual(order.map((mode) => ({ messageId: done.message_id, mode })));

    const events = await timeline(done.message_id);
    const retries = retriesOf(events);
    expect(retries.map((r) => [r.attempt, r.code])).toEqual([
      [1, 3002],
      [2, 3002],
      [3, 3002],
    ]);
    // Exponential backoff: base · 2^n with ±20 % jitter never overlaps from one retry to the next.
    expect(retries[1]!.delayMs).toBeGreaterThan(retries[0]!.delayMs);
    expect(retries[2]!.delayMs).toBeGreaterThan(retries[1]!.delayMs);
    expect(events.filter((e) => e.state === 'DELIVERED')).toHaveLength(1);
    expect(events.at(-1)).toMatchObject({ state: 'DELIVERED', attempt: 3 });
  }, 60_000);

  it('that never answers right ends DEAD (3004) after its last retry, in the DLQ with every attempt', async () => {
    const skill = uniq('a2a-down');
    const agent = await startFlakyAgent(skill, (n) => (n % 2 === 0 ? 'http-503' : 'rpc-internal'));
    agents.push(agent);
    await importAgent(agent);
    const capability = capabilityOf(skill);

    const since = Date.now() - 1_000;
    const sent = await testClient().submit({ capability, payload: 'anyone?', timeout_ms: TIMEOUT_MS });
    const failed = await eventually('the message ended', async () => {
      const m = (await (await fetch(`${urls.ingress}/v1/messages/${sent.message_id}`, { headers: { authorization: `Bearer ${adminToken()}` } })).json()) as {
        status: string;
        code: number | null;
      };
      return ['DELIVERED', 'REJECTED', 'DEAD'].includes(m.status) ? m : undefined;
    });
    expect(failed).toMatchObject({ status: 'DEAD', code: 3004 });
    // 1 + REACH_MAX_RETRIES (3) attempts, all of the same message.
    expect(agent.calls).toHaveLength(4);
    const messageId = agent.calls[0]!.messageId;
    expect(new Set(agent.calls.map((c) => c.messageId))).toEqual(new Set([messageId]));

    const events = await timeline(messageId);
    expect(retriesOf(events).map((r) => r.attempt)).toEqual([1, 2, 3]);
    expect(events.filter((e) => ['DELIVERED', 'REJECTED', 'DEAD'].includes(e.state))).toEqual([
      expect.objectContaining({ state: 'DEAD', attempt: 3, code: 3004 }),
    ]);

    // The dead letter: the whole envelope (replayable) and the four failed attempts.
    const headers = { authorization: `Bearer ${adminToken()}` };
    const entry = await (async () => {
      for (const until = Date.now() + 20_000; Date.now() < until; await new Promise((r) => setTimeout(r, 200))) {
        const list = (await (await fetch(`${urls.deadLetter}/v1/dlq?capability=${capability}&since=${since}`, { headers })).json()) as {
          entries: Array<{ dlq_id: string; message_id: string }>;
        };
        const found = list.entries.find((e) => e.message_id === messageId);
        if (found) return found;
      }
      throw new Error('timed out waiting for the dead letter');
    })();
    const full = (await (await fetch(`${urls.deadLetter}/v1/dlq/${entry.dlq_id}`, { headers })).json()) as {
      code: number;
      attempts: number;
      replayable: boolean;
      history: unknown;
      envelope: { message_id: string; capability: string };
    };
    expect(full).toMatchObject({ code: 3004, attempts: 4, replayable: true, envelope: { message_id: messageId, capability } });
    expect(JSON.stringify(full.history)).toContain('3002');
  }, 60_000);

  it('gets no more tasks at once than its max_concurrency, however many are sent: the rest wait, none is lost', async () => {
    const skill = uniq('a2a-busy');
    const agent = await startFlakyAgent(skill, () => 'working');
    agents.push(agent);
    await importAgent(agent, ['--max-concurrency', '1']);
    const client = testClient();
    const sent = await Promise.all([1, 2, 3].map((i) => client.submit({ capability: capabilityOf(skill), payload: `job ${i}` })));
    for (let n = 0; n < 3; n++) {
      await eventually(`task ${n + 1} at the agent`, async () => (agent.calls.length === n + 1 ? true : undefined));
      expect(agent.open.size).toBe(1);
      agent.finish(n); // its next GetTask poll reports it COMPLETED, which frees the slot
    }
    const ids = sent.map((r) => r.message_id);
    for (const id of ids) await eventually(`${id} delivered`, async () => ((await timeline(id)).some((e) => e.state === 'DELIVERED') ? true : undefined));
    expect(agent.maxOpen).toBe(1);
    expect(agent.calls.map((c) => c.messageId).sort()).toEqual([...ids].sort());
  }, 60_000);
});
