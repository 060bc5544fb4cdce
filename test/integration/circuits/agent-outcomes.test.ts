import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { createRedis, type Redis } from '@reach/store';
import { CircuitBreakers, countersKey, DEFAULT_POLICY } from '@reach/circuits';
import type { HandlerContext, ReachMessage } from '@reach/sdk';
import { localStack, startTestAgent, stopTestAgents, testClient, uniqueName, waitUntilRoutable } from '@reach/sdk/testing';
import { plainKafka, registryClient, statusTap, type TopicTap } from '../../helpers/kafka.js';
import { parseMetrics } from '../../helpers/metrics.js';
import { adminToken, stack, urls } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';

// Every delivery outcome is counted exactly once, whichever way the agent answers (issue 26,
// docs/protocol.md "What each answer sequence counts"): real agents of both SDKs — which answer
// `result` then `ack` — and an HTTP-push agent answering with a result or a bare status, on the
// running stack with its default breaker (opens above 50 % failures over 60 s, at least 10
// outcomes). A healthy agent failing a few percent of its work keeps its circuit closed and
// every message ends DELIVERED; failing most of it opens the circuit; a half-open probe
// answered by a result closes it.
type Rec = Record<string, unknown>;
type Payload = { i: number; fail?: boolean; fail_first?: boolean; sleep_ms?: number };

interface Subject {
  agentId: string;
  capability: string;
  stop(): Promise<void>;
}

const client = testClient();
const kafka = plainKafka();
let status: TopicTap<Rec>;
let redis: Redis;
let breakers: CircuitBreakers;
const used: string[] = [];
const cleanups: Array<() => Promise<void>> = [];
const cap = (kind: string) => `flaky_${kind}_${uniqueName('c').replace(/[^a-z0-9]/g, '')}`;

beforeAll(async () => {
  status = await statusTap<Rec>(kafka, registryClient()).open();
  redis = createRedis(stack.redisUrl, silentLogger, { connectionName: 'reach-agent-outcomes-test' });
  breakers = new CircuitBreakers(redis, DEFAULT_POLICY);
});

afterAll(async () => {
  await stopTestAgents();
  for (const c of cleanups.splice(0)) await c().catch(() => undefined);
  await Promise.all(used.map((id) => breakers?.reset(id)));
  await status?.close();
  redis?.disconnect();
});

/** The handler both SDK agents run: a plain error (transient, retryable) when the payload asks. */
function fails(p: Payload, attempt: number): boolean {
  return p.fail === true || (p.fail_first === true && attempt === 0);
}

async function tsAgent(): Promise<Subject> {
  const capability = cap('ts');
  const agent = await startTestAgent({
    handlers: {
      [capability]: async (m: ReachMessage<Payload>, ctx: HandlerContext) => {
        if (m.payload!.sleep_ms) await new Promise((r) => setTimeout(r, m.payload!.sleep_ms));
        if (fails(m.payload!, ctx.attempt)) throw new Error('the model is overloaded');
        return { i: m.payload!.i };
      },
    },
  });
  used.push(agent.agentId);
  return { agentId: agent.agentId, capability, stop: () => agent.stop() };
}

async function pythonAgent(): Promise<Subject> {
  const capability = cap('py');
  const s = localStack();
  const child: ChildProcess = spawn('/usr/bin/python3', ['sdks/python/tests/agents/flaky_agent.py'], {
    env: {
      ...process.env,
      AGENT_REACH_REGISTRY_URL: s.registryUrl,
      AGENT_REACH_DISPATCHER_URL: s.dispatcherUrl,
      AGENT_REACH_INGRESS_URL: s.ingressUrl,
      AGENT_REACH_TOKEN: adminToken(),
      PYTHONPATH: 'sdks/python/src',
      FLAKY_CAPABILITY: capability,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await exited;
  };
  cleanups.push(stop);
  const lines = createInterface({ input: child.stdout! });
  const agentId = await new Promise<string>((resolve, reject) => {
    lines.on('line', (l) => {
      const m = /^serving (\S+)/.exec(l);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`python agent exited with ${code}:\n${err}`)));
  });
  used.push(agentId);
  await waitUntilRoutable(agentId);
  return { agentId, capability, stop };
}

/**
 * An agent with only an HTTP endpoint: the dispatcher pushes its deliveries. It answers a
 * failure with 503 (the delivery stays buffered, fails at its ack deadline and is retried),
 * and a success with a result body (even `i`) or a bare 204 (odd `i`).
 */
async function httpAgent(): Promise<Subject> {
  const capability = cap('http');
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const frame = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { attempt: number; message: { payload: Payload } };
      const p = frame.message.payload;
      if (fails(p, frame.attempt)) res.writeHead(503).end();
      else if (p.i % 2 === 0) res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ result: { status: 'ok', payload: { i: p.i } } }));
      else res.writeHead(204).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const res = await fetch(`${urls.registry}/v1/agents`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken()}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      agent_type: uniqueName('it-http-flaky'),
      capabilities: [{ name: capability, mode: 'handle' }],
      endpoints: { http: `http://127.0.0.1:${(server.address() as AddressInfo).port}/push`, protocol_version: '1' },
      metadata: { max_concurrency: 10 },
      ttl_s: 600,
    }),
  });
  expect(res.status).toBe(201);
  const agentId = ((await res.json()) as { agent_id: string }).agent_id;
  used.push(agentId);
  const stop = async () => {
    await fetch(`${urls.registry}/v1/agents/${agentId}`, { method: 'DELETE', headers: { authorization: `Bearer ${adminToken()}` } }).catch(() => undefined);
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  cleanups.push(stop);
  // Held by no connection: routable once the router's view has it ONLINE.
  await eventually(
    'the router to see the HTTP agent',
    async () => {
      const r = await fetch(`${urls.router}/v1/view/agents/${agentId}`, { headers: { authorization: `Bearer ${adminToken()}` } });
      return r.ok && ((await r.json()) as { status?: string }).status === 'ONLINE';
    },
    20_000,
  );
  // The dispatcher learns the endpoint from its own view a moment after the router: a message
  // sent before that waits for its ack deadline. Send until one is DELIVERED, then start clean
  // once every warm-up message has ended and its success reached the breaker (the dispatcher
  // gathers successes for SUCCESS_FLUSH_MS): a reset before that flush left the warm-up's
  // success counted as the test's own (CI, 6 December: ok 301 of 300).
  const warmUp: string[] = [];
  await eventually(
    'a first push answered',
    async () => {
      const [id] = await submitAll(capability, [{ i: 1 }]);
      warmUp.push(id!);
      return eventually('it', () => stateOf(id!) === 'DELIVERED', 3_000).catch(() => false);
    },
    60_000,
    0,
  );
  await eventually('every warm-up message at a terminal state', () => warmUp.every((id) => stateOf(id) !== undefined), 60_000, 250);
  const warmUpDelivered = warmUp.filter((id) => stateOf(id) === 'DELIVERED').length;
  await eventually('the warm-up successes recorded', async () => (await counted(agentId)).ok >= warmUpDelivered, 5_000);
  await breakers.reset(agentId);
  return { agentId, capability, stop };
}

const SUBJECTS: Record<string, () => Promise<Subject>> = { 'TypeScript SDK': tsAgent, 'Python SDK': pythonAgent, 'HTTP push': httpAgent };

async function submitAll(capability: string, payloads: Payload[]): Promise<string[]> {
  const ids: string[] = new Array<string>(payloads.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < payloads.length; i = next++) ids[i] = (await client.submit({ capability, payload: payloads[i] })).message_id;
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return ids;
}

const TERMINAL = new Set(['DELIVERED', 'REJECTED', 'DEAD']);

/** The message's terminal state from the status events seen so far, if it has one. */
function stateOf(id: string): string | undefined {
  return status.records.find((r) => r.value?.message_id === id && TERMINAL.has(String(r.value.state)))?.value?.state as string | undefined;
}

/** The messages that did not end DELIVERED, each with its path (every status event), to diagnose from a CI log. */
function notDelivered(ids: string[]): string[] {
  return ids
    .filter((id) => stateOf(id) !== 'DELIVERED')
    .map((id) => {
      const path = status.records
        .filter((r) => r.value?.message_id === id)
        .map((r) => `${String(r.value!.state)}#${String(r.value!.attempt ?? '')} ${String(r.value!.code ?? '')} ${String(r.value!.reason ?? '')}`.trim());
      return `${id}: ${path.join(' → ')}`;
    });
}

/** Outcomes the agent's circuit counted over its eject window (5 min, longer than each test). */
async function counted(agentId: string): Promise<{ ok: number; ko: number }> {
  const fields = await redis.hgetall(countersKey(agentId));
  const sum = (suffix: string) =>
    Object.entries(fields)
      .filter(([k]) => k.startsWith('l:') && k.endsWith(suffix))
      .reduce((n, [, v]) => n + Number(v), 0);
  return { ok: sum(':ok'), ko: sum(':ko') };
}

async function lateAnswers(): Promise<number> {
  const text = await (await fetch(`${urls.dispatcher}/metrics`)).text();
  return parseMetrics(text)
    .samples.filter((s) => s.name === 'reach_dispatcher_late_answers_total')
    .reduce((n, s) => n + s.value, 0);
}

/** The failed attempts of this agent: status events naming it with a failure code. */
function failedAttemptsOf(agentId: string): Array<{ code: unknown; agent_code: unknown; reason: unknown }> {
  return status.records
    .filter((r) => r.value?.agent_id === agentId && r.value.code !== null && r.value.code !== undefined && r.value.state !== 'DELIVERED')
    .map((r) => ({
      code: r.value!.code,
      reason: r.value!.reason,
      agent_code: typeof r.value!.detail_json === 'string' ? (JSON.parse(r.value!.detail_json) as { agent_code?: unknown }).agent_code : undefined,
    }));
}

// A graceful stop under load is not the agent failing (`pnpm soak`, 5 December: every transient
// agent's stop opened its circuit). The SDK hands back work it has not started (a retryable
// reject, code 2002) and closes with 1000 once its drain time is up; what it leaves unanswered
// then (here: handlers still running, 5 s / 12 s of work against a 2 s / 10 s drain) is retried
// at once on another agent, and the stopping agent's circuit records no failure.
const STOP_WORK_MS: Record<string, number> = { 'TypeScript SDK': 5_000, 'Python SDK': 12_000 };

describe.each(Object.keys(STOP_WORK_MS))('a %s agent stopped gracefully with work in hand', (kind) => {
  it('its unfinished work is retried on another agent and DELIVERED; its circuit records no failure', async () => {
    const agent = await SUBJECTS[kind]!();
    const other = await startTestAgent({ handlers: { [agent.capability]: async (m: ReachMessage<Payload>) => ({ i: m.payload!.i }) } });
    const payloads = Array.from({ length: 40 }, (_, i): Payload => ({ i, sleep_ms: STOP_WORK_MS[kind] }));
    const ids = await submitAll(agent.capability, payloads);
    const routedTo = (id: string) => status.records.some((r) => r.value?.message_id === id && r.value.state === 'ROUTED' && r.value.agent_id === agent.agentId);
    await eventually('work routed to the subject', () => ids.filter(routedTo).length >= 3 || undefined, 30_000, 50);
    await agent.stop();
    await eventually('every message at a terminal state', () => ids.every((id) => stateOf(id) !== undefined), 120_000, 250);
    expect(notDelivered(ids)).toEqual([]);
    // the work it held was taken back from it: failed attempts, each a hand-back
    const failed = failedAttemptsOf(agent.agentId);
    expect(failed.length, 'attempts the stopping agent did not finish').toBeGreaterThan(0);
    for (const f of failed) expect(f.agent_code === 2002 || (f.code === 1002 && /closed with 1000/.test(String(f.reason))), JSON.stringify(f)).toBe(true);
    expect((await counted(agent.agentId)).ko).toBe(0);
    expect(await breakers.state(agent.agentId)).toMatchObject({ state: 'CLOSED' });
    await other.stop();
  }, 240_000);
});

describe.each(Object.keys(SUBJECTS))('outcomes of a %s agent', (kind) => {
  it('failing 5 % of 300 messages (transient): every message ends DELIVERED, each counted once, and its circuit stays CLOSED', async () => {
    const agent = await SUBJECTS[kind]!();
    const lateBefore = await lateAnswers();
    const payloads = Array.from({ length: 300 }, (_, i): Payload => ({ i, fail_first: i % 20 === 0 }));
    const ids = await submitAll(agent.capability, payloads);
    await eventually('every message at a terminal state', () => ids.every((id) => stateOf(id) !== undefined), 150_000, 250);
    expect(notDelivered(ids)).toEqual([]);
    // One success per message and one failure per failed attempt: the ack that follows a
    // result is not counted again, and nothing is missing.
    await eventually('the circuit to have every outcome', async () => (await counted(agent.agentId)).ok >= 300, 5_000);
    expect(await counted(agent.agentId)).toEqual({ ok: 300, ko: 15 });
    expect(await breakers.state(agent.agentId)).toMatchObject({ effective: 'CLOSED', state: 'CLOSED' });
    expect(await lateAnswers()).toBe(lateBefore);
    await agent.stop();
  }, 240_000);

  it('failing 70 % of its messages opens its circuit', async () => {
    const agent = await SUBJECTS[kind]!();
    const payloads = Array.from({ length: 40 }, (_, i): Payload => ({ i, fail: i % 10 < 7 }));
    await submitAll(agent.capability, payloads);
    const opened = await eventually(
      'the circuit to open',
      async () => {
        const s = await breakers.state(agent.agentId);
        return s.state === 'OPEN' ? s : undefined;
      },
      60_000,
      200,
    );
    expect(opened).toMatchObject({ reason: 'failure_rate' });
    await breakers.reset(agent.agentId);
    await agent.stop();
  }, 120_000);

  it('a half-open probe answered by a result closes the circuit', async () => {
    const agent = await SUBJECTS[kind]!();
    // Opened the way the dispatcher would, for 1.5 s (the open period is fixed in Redis).
    const short = new CircuitBreakers(redis, { ...DEFAULT_POLICY, openMs: 1_500 });
    for (let i = 0; i < 10; i++) await short.recordOutcome(agent.agentId, false);
    expect((await breakers.state(agent.agentId)).effective).toBe('OPEN');
    await eventually('half-open', async () => (await breakers.state(agent.agentId)).effective === 'HALF_OPEN', 10_000);
    // An even i: the HTTP agent answers it with a result body too.
    const [probe] = await submitAll(agent.capability, [{ i: 2 }]);
    await eventually('the probe DELIVERED', () => stateOf(probe!) === 'DELIVERED', 30_000);
    const closed = await eventually(
      'the circuit to close',
      async () => {
        const s = await breakers.state(agent.agentId);
        return s.state === 'CLOSED' ? s : undefined;
      },
      5_000,
    );
    expect(closed).toMatchObject({ effective: 'CLOSED' });
    await agent.stop();
  }, 120_000);
});
