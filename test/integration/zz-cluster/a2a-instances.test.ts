import { randomUUID } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { SendMessageRequest, TaskState, type StreamResponse } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, type Client } from '@a2a-js/sdk/client';
import { startTestAgent, stopTestAgents, uniqueName } from '@reach/sdk/testing';
import { eventually } from '../../helpers/wait.js';
import { startSecondStack, type SecondStack } from './second-stack.js';

// Issue #29 §1: the A2A bridge keeps no task state in memory, so two ingress instances behind
// one address serve the same tasks and streams. `reach up --instances 2` on a second stack; a
// round-robin proxy in front of its two ingresses is the "one address": every request of the
// A2A JS SDK client goes to the other instance than the one before, so a stream begun on one
// instance is resumed on the other, and tasks are read and listed from both.
let s: SecondStack;
let keep = false;
let proxy: Server;
let proxyUrl: string;
const served = [0, 0];

/** Forwards each request to the next ingress instance in turn (streams included), Host kept. */
function roundRobin(targets: string[]): Server {
  let next = 0;
  return createServer((req, res) => {
    const i = next++ % targets.length;
    served[i]!++;
    const target = new URL(targets[i]!);
    const out = request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    out.on('error', () => res.destroy());
    res.on('close', () => out.destroy());
    req.pipe(out);
  });
}

beforeAll(async () => {
  s = await startSecondStack({
    name: 'a2a-instances',
    portBase: 29000,
    instances: 2,
    // a database and Redis db of its own (other second stacks use reach_cluster and db 3)
    extraEnv: { REACH_DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/reach_a2a_cluster', REACH_REDIS_URL: 'redis://127.0.0.1:6379/13' },
  });
  proxy = roundRobin([s.url('ingress', 1), s.url('ingress', 2)]);
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
}, 300_000);

afterAll(async () => {
  await stopTestAgents();
  proxy?.closeAllConnections();
  await new Promise((r) => proxy?.close(r));
  if (s) {
    const res = await s.down(keep);
    expect(res.code, res.stderr).toBe(0);
  }
}, 200_000);

async function producerToken(): Promise<string> {
  const res = await fetch(`${s.url('registry')}/v1/agents`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.adminToken()}`, 'content-type': 'application/json' },
    body: JSON.stringify({ agent_id: uniqueName('a2a.client'), agent_type: 'a2a-client', capabilities: [] }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { token: string }).token;
}

async function client(token: string): Promise<Client> {
  const fetchImpl: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl })] });
  return new ClientFactory(options).createFromUrl(proxyUrl);
}

const position = (e: StreamResponse): number | undefined => {
  const p = e.payload;
  const meta = p?.$case === 'task' || p?.$case === 'statusUpdate' ? (p.value.metadata as { reach?: { position?: number } } | undefined) : undefined;
  return meta?.reach?.position;
};

describe('A2A on two ingress instances behind one address', () => {
  it('a stream begun on one instance resumes on the other with nothing lost; tasks are read and listed from both', async () => {
    onTestFailed(() => void (keep = true));
    const capability = uniqueName('a2a_two').replace(/-/g, '_');
    let open: () => void = () => undefined;
    const hold = new Promise<void>((r) => (open = r));
    await startTestAgent({
      stack: s.sdk,
      handlers: {
        [capability]: async (m) => {
          if (m.payload === 'hold') await hold;
          return { done: m.payload };
        },
      },
    });
    const a2a = await client(await producerToken());
    await eventually('the capability on the card of both instances', async () => {
      const cards = await Promise.all([1, 2].map(async (i) => (await fetch(`${s.url('ingress', i)}/.well-known/agent-card.json`)).json()));
      return cards.every((c) => (c as { skills: Array<{ id: string }> }).skills.some((k) => k.id === capability)) ? true : undefined;
    });

    // the stream: begun through the proxy, cut after the agent has it, resumed through the proxy
    const abort = new AbortController();
    const before: StreamResponse[] = [];
    const message = SendMessageRequest.fromJSON({
      message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold' }] },
      metadata: { skill: capability },
    });
    const servedBefore = [...served];
    for await (const e of a2a.sendMessageStream(message, { signal: abort.signal })) {
      before.push(e);
      const state = e.payload?.$case === 'statusUpdate' ? e.payload.value.status?.state : undefined;
      if (state === TaskState.TASK_STATE_WORKING) break;
    }
    abort.abort();
    const taskId = before[0]!.payload?.$case === 'task' ? before[0]!.payload.value.id : '';
    const streamedBy = served.findIndex((n, i) => n > servedBefore[i]!);
    open();
    const last = Math.max(...before.map((e) => position(e) ?? 0));
    const servedMid = [...served];
    const after: StreamResponse[] = [];
    for await (const e of a2a.resubscribeTask({ tenant: '', id: taskId }, { serviceParameters: { 'Last-Event-ID': String(last) } })) after.push(e);
    const resumedBy = served.findIndex((n, i) => n > servedMid[i]!);
    expect(resumedBy).not.toBe(streamedBy);
    const final = after.at(-1)!;
    expect(final.payload?.$case === 'statusUpdate' ? final.payload.value.status?.state : undefined).toBe(TaskState.TASK_STATE_COMPLETED);
    const positions = [...before.slice(1), ...after.slice(1)].map(position).filter((p): p is number => p !== undefined);
    expect(positions).toEqual(positions.map((_, i) => i + 1));

    // GetTask from both instances (two calls through the proxy), and the list
    const got = await Promise.all([
      a2a.getTask({ tenant: '', id: taskId, historyLength: undefined }),
      a2a.getTask({ tenant: '', id: taskId, historyLength: undefined }),
    ]);
    expect(got.map((t) => t.status?.state)).toEqual([TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_COMPLETED]);
    const sent = await a2a.sendMessage(
      SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'quick' }] }, metadata: { skill: capability } }),
    );
    expect('status' in sent && sent.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const listed = await eventually('both tasks listed', async () => {
      const r = await a2a.listTasks({
        tenant: '',
        contextId: '',
        status: TaskState.TASK_STATE_COMPLETED,
        pageSize: 10,
        pageToken: '',
        historyLength: undefined,
        statusTimestampAfter: undefined,
        includeArtifacts: undefined,
      });
      return r.tasks.length === 2 ? r : undefined;
    });
    expect(listed.tasks.map((t) => t.id)).toContain(taskId);
    expect(served.every((n) => n > 0)).toBe(true);
  });
});
