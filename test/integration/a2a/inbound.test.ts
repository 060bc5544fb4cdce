import { randomUUID } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, TaskState, type StreamResponse, type Task } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, RestTransportFactory, type Client } from '@a2a-js/sdk/client';
import { startTestAgent, stopTestAgents } from '@reach/sdk/testing';
import { uniq, urls } from '../../helpers/env.js';
import { scrape } from '../../helpers/metrics.js';
import { registerProducer, type ProducerAgent } from '../ingress/producer-agent.js';
import { a2aCapability, a2aClient as a2aClientFor } from './a2a-client.js';

// Issue #29 §1 and §3: Agent-Reach as an A2A 1.0 server, driven by the official A2A JS SDK
// (@a2a-js/sdk, JSON-RPC binding) against the real stack: the card, send, stream, a
// disconnect mid-stream resumed with nothing lost, get, list, cancel. The A2A client is a
// registered pure producer whose token is the bearer credential the card asks for.
let sender: ProducerAgent;

beforeAll(async () => {
  sender = await registerProducer('a2a-client');
});
afterEach(stopTestAgents);

const cap = a2aCapability;
const a2aClient = (path = ''): Promise<Client> => a2aClientFor(sender.token, path);

function textMessage(skill: string | undefined, text: string, extra: { messageId?: string; contextId?: string } = {}): SendMessageRequest {
  return SendMessageRequest.fromJSON({
    message: { messageId: extra.messageId ?? randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...(extra.contextId ? { contextId: extra.contextId } : {}) },
    ...(skill ? { metadata: { skill } } : {}),
  });
}

function asTask(r: unknown): Task {
  const t = r as Task;
  if (!t || typeof t !== 'object' || !('status' in t)) throw new Error(`not a task: ${JSON.stringify(r)}`);
  return t;
}

/** The timeline position an event reflects (its SSE id), from the metadata Agent-Reach puts on it. */
function positionOf(e: StreamResponse): number | undefined {
  const p = e.payload;
  if (!p) return undefined;
  const meta = p.$case === 'task' || p.$case === 'statusUpdate' ? (p.value.metadata as { reach?: { position?: number } } | undefined) : undefined;
  return meta?.reach?.position;
}

function stateOf(e: StreamResponse): TaskState | undefined {
  const p = e.payload;
  if (p?.$case === 'task') return p.value.status?.state;
  if (p?.$case === 'statusUpdate') return p.value.status?.state;
  return undefined;
}

async function eventually<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await check();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Answers the dispatcher refused because their delivery had ended (late_answers_total, every kind). */
async function lateAnswers(): Promise<number> {
  const { samples } = await scrape(urls.dispatcher);
  return samples.filter((x) => x.name === 'reach_dispatcher_late_answers_total').reduce((n, x) => n + x.value, 0);
}

/** A gate a handler waits on until the test opens it. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

async function timeline(messageId: string): Promise<Array<{ state: string; code: number | null }>> {
  const res = await fetch(`${urls.ingress}/v1/messages/${messageId}/events`, { headers: { authorization: `Bearer ${sender.token}` } });
  return ((await res.json()) as { events: Array<{ state: string; code: number | null }> }).events;
}

describe('A2A inbound: Agent-Reach as an A2A server, with @a2a-js/sdk as the client', () => {
  it('discovers the live capabilities as skills of the well-known card, and one card per capability', async () => {
    const capability = cap('card');
    await startTestAgent({ handlers: { [capability]: async () => ({ ok: true }) } });
    const client = await a2aClient();
    const card = await eventually('the capability on the card', async () => {
      const c = await (await a2aClient()).getAgentCard();
      return c.skills.some((s) => s.id === capability) ? c : undefined;
    });
    expect(client.protocolVersion).toBe('1.0');
    expect(card.capabilities?.streaming).toBe(true);
    expect(Object.keys(card.securitySchemes)).toEqual(['reachToken']);
    expect(card.securitySchemes.reachToken?.scheme?.$case).toBe('httpAuthSecurityScheme');

    const own = await (await a2aClient(`/a2a/capabilities/${capability}/`)).getAgentCard();
    expect(own.skills.map((s) => s.id)).toEqual([capability]);
    expect(own.supportedInterfaces.map((i) => i.protocolBinding)).toEqual(['JSONRPC', 'HTTP+JSON']);
    expect(own.supportedInterfaces[0]?.url).toBe(`${urls.ingress.replace('127.0.0.1', '127.0.0.1')}/a2a/capabilities/${capability}`);
  });

  it('SendMessage (blocking) completes with the handler result as the artifact; the same messageId again is the same task', async () => {
    const capability = cap('send');
    const agent = await startTestAgent({ handlers: { [capability]: async (m) => ({ echoed: m.payload }) } });
    const client = await a2aClient();
    const request = textMessage(capability, 'hello', { contextId: uniq('ctx') });
    const task = asTask(await client.sendMessage(request));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(task.id).toMatch(/^msg_/);
    expect(task.contextId).toBe(request.message!.contextId);
    expect(task.artifacts).toHaveLength(1);
    expect(task.artifacts[0]!.parts[0]!.content).toEqual({ $case: 'data', value: { echoed: 'hello' } });
    expect(agent.received.map((m) => m.message_id)).toEqual([task.id]);
    expect(agent.received[0]!.session_id).toBe(request.message!.contextId);

    const again = asTask(await client.sendMessage(request));
    expect(again.id).toBe(task.id);
    expect(agent.received).toHaveLength(1);
  });

  it('GetTask and ListTasks read the task back; ListTasks filters by context and pages', async () => {
    const capability = cap('list');
    await startTestAgent({ handlers: { [capability]: async () => 'done' } });
    const client = await a2aClient();
    const contextId = uniq('ctx');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(asTask(await client.sendMessage(textMessage(capability, `n${i}`, { contextId }))).id);

    const got = await client.getTask({ tenant: '', id: ids[0]!, historyLength: undefined });
    expect(got.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(got.artifacts[0]!.parts[0]!.content).toEqual({ $case: 'text', value: 'done' });

    const all = await eventually('three listed tasks', async () => {
      const r = await client.listTasks({
        tenant: '',
        contextId,
        status: TaskState.TASK_STATE_UNSPECIFIED,
        pageSize: 10,
        pageToken: '',
        historyLength: undefined,
        statusTimestampAfter: undefined,
        includeArtifacts: undefined,
      });
      return r.tasks.length === 3 && r.tasks.every((t) => t.status?.state === TaskState.TASK_STATE_COMPLETED) ? r : undefined;
    });
    expect(all.tasks.map((t) => t.id).sort()).toEqual([...ids].sort());
    expect(all.totalSize).toBe(3);
    expect(all.nextPageToken).toBe('');

    const seen: string[] = [];
    let pageToken = '';
    do {
      const page = await client.listTasks({
        tenant: '',
        contextId,
        status: TaskState.TASK_STATE_COMPLETED,
        pageSize: 2,
        pageToken,
        historyLength: undefined,
        statusTimestampAfter: undefined,
        includeArtifacts: undefined,
      });
      seen.push(...page.tasks.map((t) => t.id));
      pageToken = page.nextPageToken;
    } while (pageToken !== '');
    expect(seen.sort()).toEqual([...ids].sort());

    await expect(client.getTask({ tenant: '', id: 'msg_nobody', historyLength: undefined })).rejects.toMatchObject({
      name: expect.stringMatching(/TaskNotFound/),
    });
  });

  it('streams a task; a client that disconnects mid-stream resumes (Last-Event-ID on SubscribeToTask) and misses nothing', async () => {
    const capability = cap('stream');
    const hold = gate();
    await startTestAgent({
      handlers: {
        [capability]: async () => {
          await hold.wait;
          return { finished: true };
        },
      },
    });
    const client = await a2aClient();
    const abort = new AbortController();
    const before: StreamResponse[] = [];
    // Read until the agent has the message (WORKING), then drop the connection.
    try {
      for await (const e of client.sendMessageStream(textMessage(capability, 'long job'), { signal: abort.signal })) {
        before.push(e);
        if (stateOf(e) === TaskState.TASK_STATE_WORKING && before.length >= 3) abort.abort();
      }
    } catch (err) {
      expect((err as Error).name).toBe('AbortError');
    }
    const first = before[0]!.payload;
    expect(first?.$case).toBe('task');
    const taskId = first!.$case === 'task' ? first!.value.id : '';
    const lastPosition = Math.max(...before.map((e) => positionOf(e) ?? 0));

    hold.open();
    const after: StreamResponse[] = [];
    for await (const e of client.resubscribeTask({ tenant: '', id: taskId }, { serviceParameters: { 'Last-Event-ID': String(lastPosition) } })) after.push(e);

    expect(after[0]!.payload?.$case).toBe('task');
    const replayed = after.slice(1);
    const final = replayed.at(-1)!;
    expect(stateOf(final)).toBe(TaskState.TASK_STATE_COMPLETED);
    const artifact = replayed.find((e) => e.payload?.$case === 'artifactUpdate');
    expect(artifact?.payload?.$case === 'artifactUpdate' ? artifact.payload.value.artifact?.parts[0]?.content : undefined).toEqual({
      $case: 'data',
      value: { finished: true },
    });
    // Every timeline entry reached the client exactly once, across the two connections.
    const positions = [...before.slice(1), ...replayed].map(positionOf).filter((p): p is number => p !== undefined);
    const events = await timeline(taskId);
    expect(positions).toEqual(events.map((_, i) => i + 1));
  });

  it('SubscribeToTask on a running task starts with the Task and follows it to the end', async () => {
    const capability = cap('sub');
    const hold = gate();
    const agent = await startTestAgent({
      handlers: {
        [capability]: async () => {
          await hold.wait;
          return 'late';
        },
      },
    });
    const client = await a2aClient();
    const task = asTask(
      await client.sendMessage({
        ...textMessage(capability, 'x'),
        configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: true },
      }),
    );
    expect([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]).toContain(task.status?.state);
    await eventually('the agent has it', async () => (agent.received.length > 0 ? true : undefined));
    const events: StreamResponse[] = [];
    for await (const e of client.resubscribeTask({ tenant: '', id: task.id })) {
      if (events.length === 0) hold.open();
      events.push(e);
    }
    expect(events[0]!.payload?.$case).toBe('task');
    expect(stateOf(events.at(-1)!)).toBe(TaskState.TASK_STATE_COMPLETED);
    // A finished task is not subscribable (spec §3.1.6): GetTask has it.
    await expect(
      (async () => {
        for await (const _ of client.resubscribeTask({ tenant: '', id: task.id })) void _;
      })(),
    ).rejects.toThrow(/terminal state/);
  });

  it('CancelTask ends an undelivered task CANCELED (DEAD 3007 in its timeline); a delivered one is not cancelable', async () => {
    const capability = cap('cancel');
    const hold = gate();
    const agent = await startTestAgent({
      handlers: {
        [capability]: async () => {
          await hold.wait;
          return 'too late';
        },
      },
    });
    const client = await a2aClient();
    const request = textMessage(capability, 'cancel me');
    request.configuration = { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: true };
    const task = asTask(await client.sendMessage(request));
    await eventually('the agent has it', async () => (agent.received.length > 0 ? true : undefined));

    const canceled = await client.cancelTask({ tenant: '', id: task.id, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    // The agent finishes anyway and answers: the dispatcher refuses the answer (counted as late).
    const lateBefore = await lateAnswers();
    hold.open();
    await eventually('the agent\u2019s answer refused', async () => ((await lateAnswers()) > lateBefore ? true : undefined));
    const after = await eventually('the cancel in the read model', async () => {
      const t = await client.getTask({ tenant: '', id: task.id, historyLength: undefined });
      return t.status?.state === TaskState.TASK_STATE_CANCELED ? t : undefined;
    });
    expect(after.artifacts).toEqual([]);
    const events = await eventually('DEAD 3007 in the timeline', async () => {
      const ev = await timeline(task.id);
      return ev.some((e) => e.state === 'DEAD' && e.code === 3007) ? ev : undefined;
    });
    expect(events.filter((e) => e.state === 'DEAD').map((e) => e.code)).toEqual([3007]);
    expect(events.map((e) => e.state)).not.toContain('DELIVERED');

    const done = asTask(await client.sendMessage(textMessage(capability, 'finish me')));
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    await expect(client.cancelTask({ tenant: '', id: done.id, metadata: undefined })).rejects.toThrow(/can no longer be canceled/);
  });

  it('refuses a request without the agent token, and an unsupported A2A-Version, with the spec error codes', async () => {
    const rpc = (headers: Record<string, string>) =>
      fetch(`${urls.ingress}/a2a/v1`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'GetTask', params: { id: 'msg_x' } }),
      });
    const noToken = await rpc({ 'A2A-Version': '1.0' });
    expect(noToken.status).toBe(401);
    expect(await noToken.json()).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: 1003, name: 'AUTH_FAILED' } });
    const oldVersion = await rpc({ 'A2A-Version': '0.3', authorization: `Bearer ${sender.token}` });
    expect(await oldVersion.json()).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: -32009 } });
    const unknown = await fetch(`${urls.ingress}/a2a/v1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'A2A-Version': '1.0', authorization: `Bearer ${sender.token}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'message/send', params: {} }),
    });
    expect(await unknown.json()).toMatchObject({ id: 8, error: { code: -32601 } });
  });
});

/** The SSE frames of a response as they are on the wire: id and parsed data. */
async function* sseFrames(res: Response): AsyncGenerator<{ id: string | undefined; data: { result?: Record<string, unknown>; error?: unknown } }> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const id = /^id: (.*)$/m.exec(frame)?.[1];
      const data = /^data: (.*)$/m.exec(frame)?.[1];
      if (data !== undefined) yield { id, data: JSON.parse(data) as { result?: Record<string, unknown> } };
    }
  }
}

describe('A2A inbound on the wire: SSE ids and Last-Event-ID', () => {
  it('every event has an id; SendStreamingMessage again with the same messageId and Last-Event-ID sends only what came after', async () => {
    const capability = cap('wire');
    const hold = gate();
    await startTestAgent({
      handlers: {
        [capability]: async () => {
          await hold.wait;
          return 'wired';
        },
      },
    });
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 'r1',
      method: 'SendStreamingMessage',
      params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'x' }] }, metadata: { skill: capability } },
    });
    const post = (headers: Record<string, string> = {}, signal?: AbortSignal) =>
      fetch(`${urls.ingress}/a2a/v1`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'A2A-Version': '1.0', authorization: `Bearer ${sender.token}`, ...headers },
        body,
        ...(signal ? { signal } : {}),
      });
    const abort = new AbortController();
    const res = await post({}, abort.signal);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const first: Array<{ id: string | undefined; kind: string }> = [];
    for await (const f of sseFrames(res)) {
      first.push({ id: f.id, kind: Object.keys(f.data.result ?? {})[0]! });
      if (first.length === 3) break;
    }
    abort.abort(); // the connection drops mid-stream
    expect(first.map((f) => f.kind)).toEqual(['task', 'statusUpdate', 'statusUpdate']);
    expect(first.map((f) => f.id)).toEqual(['0', '1', '2']);

    hold.open();
    const rest: Array<{ id: string | undefined; kind: string }> = [];
    for await (const f of sseFrames(await post({ 'Last-Event-ID': '2' }))) rest.push({ id: f.id, kind: Object.keys(f.data.result ?? {})[0]! });
    const ids = rest.map((f) => f.id);
    // The Task as it stands (carrying the resume point), then positions 3… with the result just before the last.
    expect(rest[0]).toEqual({ id: '2', kind: 'task' });
    const last = Number(ids.at(-1));
    expect(ids.slice(1)).toEqual([...Array.from({ length: last - 3 }, (_, i) => String(i + 3)), `${last}.result`, String(last)]);
    expect(rest.at(-2)!.kind).toBe('artifactUpdate');
  });
});

describe('A2A inbound over the HTTP+JSON binding, with @a2a-js/sdk’s REST transport', () => {
  /** Every URL the REST transport called. */
  const called: string[] = [];
  async function restClient(): Promise<Client> {
    const fetchImpl: typeof fetch = (input, init) => {
      called.push(String(input));
      const headers = new Headers(init?.headers);
      headers.set('authorization', `Bearer ${sender.token}`);
      return fetch(input, { ...init, headers });
    };
    return new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new RestTransportFactory({ fetchImpl })],
        preferredTransports: ['HTTP+JSON'],
      }),
    ).createFromUrl(urls.ingress);
  }

  it('sends, gets, lists, refuses to cancel a delivered task, and streams with a resume that misses nothing', async () => {
    const capability = cap('rest');
    const hold = gate();
    await startTestAgent({
      handlers: {
        [capability]: async (m) => {
          if (m.payload === 'hold') await hold.wait;
          return { rest: m.payload };
        },
      },
    });
    const client = await restClient();
    expect(client.protocolVersion).toBe('1.0');
    const contextId = uniq('ctx');
    const task = asTask(await client.sendMessage(textMessage(capability, 'hello', { contextId })));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(task.artifacts[0]!.parts[0]!.content).toEqual({ $case: 'data', value: { rest: 'hello' } });
    expect((await client.getTask({ tenant: '', id: task.id, historyLength: undefined })).status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const listed = await eventually('the task listed', async () => {
      const r = await client.listTasks({
        tenant: '',
        contextId,
        status: TaskState.TASK_STATE_UNSPECIFIED,
        pageSize: 10,
        pageToken: '',
        historyLength: undefined,
        statusTimestampAfter: undefined,
        includeArtifacts: undefined,
      });
      return r.tasks.length === 1 ? r : undefined;
    });
    expect(listed.tasks[0]!.id).toBe(task.id);
    await expect(client.cancelTask({ tenant: '', id: task.id, metadata: undefined })).rejects.toThrow(/can no longer be canceled/);

    const abort = new AbortController();
    const before: StreamResponse[] = [];
    for await (const e of client.sendMessageStream(textMessage(capability, 'hold'), { signal: abort.signal })) {
      before.push(e);
      if (stateOf(e) === TaskState.TASK_STATE_WORKING) break;
    }
    abort.abort();
    const taskId = before[0]!.payload?.$case === 'task' ? before[0]!.payload.value.id : '';
    hold.open();
    const last = Math.max(...before.map((e) => positionOf(e) ?? 0));
    const after: StreamResponse[] = [];
    for await (const e of client.resubscribeTask({ tenant: '', id: taskId }, { serviceParameters: { 'Last-Event-ID': String(last) } })) after.push(e);
    expect(stateOf(after.at(-1)!)).toBe(TaskState.TASK_STATE_COMPLETED);
    const positions = [...before.slice(1), ...after.slice(1)].map(positionOf).filter((p): p is number => p !== undefined);
    expect(positions).toEqual((await timeline(taskId)).map((_, i) => i + 1));
    // every call went over the HTTP+JSON binding
    expect(called.length).toBeGreaterThan(5);
    expect(called.every((u) => new URL(u).pathname.startsWith('/a2a/rest/'))).toBe(true);
    expect(called.map((u) => new URL(u).pathname.replace(/msg_\w+/, '{id}'))).toEqual(
      expect.arrayContaining([
        '/a2a/rest/message:send',
        '/a2a/rest/tasks/{id}',
        '/a2a/rest/tasks',
        '/a2a/rest/tasks/{id}:cancel',
        '/a2a/rest/message:stream',
        '/a2a/rest/tasks/{id}:subscribe',
      ]),
    );
  });

  it('answers errors as google.rpc.Status with the A2A error named in an ErrorInfo', async () => {
    const res = await fetch(`${urls.ingress}/a2a/rest/tasks/msg_nobody`, { headers: { 'A2A-Version': '1.0', authorization: `Bearer ${sender.token}` } });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({
      error: {
        code: 404,
        status: 'NOT_FOUND',
        details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'TASK_NOT_FOUND', domain: 'a2a-protocol.org' }],
      },
    });
  });
});

describe('A2A push notifications: not offered, and said so', () => {
  // Decided in docs/a2a.md: streams are resumable and tasks are kept, so a client polls or
  // resumes; a webhook would need its own retries and dead letters to be as reliable.
  const rpc = async (method: string, params: unknown) =>
    (await (
      await fetch(`${urls.ingress}/a2a/v1`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'A2A-Version': '1.0', authorization: `Bearer ${sender.token}` },
        body: JSON.stringify({ jsonrpc: '2.0', id: 11, method, params }),
      })
    ).json()) as { result?: unknown; error?: { code: number; message: string } };

  it('the card says pushNotifications: false; every config method is PushNotificationNotSupportedError (-32003)', async () => {
    const card = await (await a2aClient()).getAgentCard();
    expect(card.capabilities?.pushNotifications).toBe(false);
    const config = { taskId: 'msg_any', pushNotificationConfig: { url: 'https://example.test/hook' } };
    for (const [method, params] of [
      ['CreateTaskPushNotificationConfig', config],
      ['GetTaskPushNotificationConfig', { taskId: 'msg_any', id: 'c1' }],
      ['ListTaskPushNotificationConfigs', { taskId: 'msg_any' }],
      ['DeleteTaskPushNotificationConfig', { taskId: 'msg_any', id: 'c1' }],
    ] as const)
      expect(await rpc(method, params), method).toMatchObject({ error: { code: -32003 } });
  });

  it('a message that asks for a webhook is refused (-32003) before it becomes a task', async () => {
    const contextId = uniq('ctx-push');
    const refused = await rpc('SendMessage', {
      message: { messageId: randomUUID(), contextId, role: 'ROLE_USER', parts: [{ text: 'tell my webhook' }] },
      metadata: { skill: cap('push') },
      configuration: { taskPushNotificationConfig: { url: 'https://example.test/hook' }, returnImmediately: true },
    });
    expect(refused).toMatchObject({ error: { code: -32003 } });
    expect(await rpc('ListTasks', { contextId })).toMatchObject({ result: { tasks: [], totalSize: 0 } });
  });

  it('over HTTP+JSON the config paths answer 400 FAILED_PRECONDITION, reason PUSH_NOTIFICATION_NOT_SUPPORTED; no extended card either', async () => {
    const headers = { 'content-type': 'application/json', 'A2A-Version': '1.0', authorization: `Bearer ${sender.token}` };
    const base = `${urls.ingress}/a2a/rest/tasks/msg_any/pushNotificationConfigs`;
    for (const [method, url] of [
      ['POST', base],
      ['GET', base],
      ['GET', `${base}/c1`],
      ['DELETE', `${base}/c1`],
    ] as const) {
      const res = await fetch(url, { method, headers, ...(method === 'POST' ? { body: JSON.stringify({ url: 'https://example.test/hook' }) } : {}) });
      expect(res.status, `${method} ${url}`).toBe(400);
      expect(await res.json()).toMatchObject({
        error: { status: 'FAILED_PRECONDITION', details: [{ reason: 'PUSH_NOTIFICATION_NOT_SUPPORTED', domain: 'a2a-protocol.org' }] },
      });
    }
    const noToken = await fetch(base, { headers: { 'A2A-Version': '1.0' } });
    expect(noToken.status).toBe(401);
    const extended = await fetch(`${urls.ingress}/a2a/rest/extendedAgentCard`, { headers });
    expect(extended.status).toBe(400);
    expect(await extended.json()).toMatchObject({ error: { details: [{ reason: 'UNSUPPORTED_OPERATION' }] } });
  });
});
