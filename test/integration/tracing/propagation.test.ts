import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HandlerContext, ReachMessage } from '@reach/sdk';
import { localStack, startTestAgent, stopTestAgents, type TestAgent } from '@reach/sdk/testing';
import { adminToken, uniq, urls } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';

// W3C traceparent carried end to end by the stack as it runs (tracing off, the default: no span
// is made, so the producer's context arrives unchanged): HTTP → Kafka → router → dispatcher →
// the `deliver` frame (handler ctx.traceparent) → the `result` frame → the correlated reply
// through ingress again → its own `deliver` frame; and the `traceparent` header of an HTTP push.

const cap = (what: string) => uniq(`tp_${what}`).replace(/-/g, '_');
const hex = (n: number) => Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join('');
const auth = () => ({ authorization: `Bearer ${adminToken()}` });

async function submit(body: Record<string, unknown>, traceparent: string): Promise<string> {
  const res = await fetch(`${urls.ingress}/v1/messages`, {
    method: 'POST',
    headers: { ...auth(), 'content-type': 'application/json', traceparent },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as { message_id: string };
  expect(res.status, JSON.stringify(json)).toBe(202);
  return json.message_id;
}

describe('traceparent end to end with tracing off', () => {
  const capability = cap('worker');
  /** ctx.traceparent of each run of the worker's handler. */
  const workerSaw: Array<string | undefined> = [];
  /** What the requester's direct handler got (the correlated replies). */
  const replies: Array<{ msg: ReachMessage; traceparent: string | undefined }> = [];
  let requester: TestAgent;

  beforeAll(async () => {
    await startTestAgent({
      handlers: {
        [capability]: async (_m, ctx) => {
          workerSaw.push(ctx.traceparent);
          return { done: true };
        },
      },
    });
    requester = await startTestAgent({
      direct: async (msg: ReachMessage, ctx: HandlerContext) => {
        replies.push({ msg, traceparent: ctx.traceparent });
      },
    });
  });

  afterAll(async () => {
    await stopTestAgents();
  });

  it('reaches the handler, rides back on the result, and arrives with the correlated reply', async () => {
    const traceparent = `00-${hex(32)}-${hex(16)}-01`;
    const id = await submit({ capability, reply_to: requester.agentId, payload: { n: 1 } }, traceparent);
    await eventually('the worker handled it', () => workerSaw.length > 0, 20_000);
    expect(workerSaw).toEqual([traceparent]);
    const reply = await eventually('the correlated reply at the requester', () => replies.find((r) => r.msg.correlation_id === id), 20_000);
    expect(reply.msg.message_type).toBe('task_result');
    expect(reply.msg.trace_id).toBe(traceparent.split('-')[1]);
    expect(reply.traceparent).toBe(traceparent);
  });
});

describe('HTTP push carries the traceparent header', () => {
  let server: Server;
  const pushes: Array<{ headers: IncomingHttpHeaders; body: Record<string, unknown> }> = [];
  let agentId: string;
  const capability = cap('pushed');

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        pushes.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown> });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    // An agent that only has an HTTP endpoint: the dispatcher pushes its deliveries.
    const res = await fetch(`${urls.registry}/v1/agents`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({
        agent_type: uniq('tp-http'),
        capabilities: [{ name: capability, mode: 'handle' }],
        endpoints: { http: `http://127.0.0.1:${port}/push`, protocol_version: '1' },
        metadata: { max_concurrency: 10 },
        ttl_s: 60,
      }),
    });
    expect(res.status).toBe(201);
    agentId = ((await res.json()) as { agent_id: string }).agent_id;
  });

  afterAll(async () => {
    await fetch(`${urls.registry}/v1/agents/${agentId}`, { method: 'DELETE', headers: auth() }).catch(() => undefined);
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it("sends the delivery's traceparent with the pushed frame, which carries it too", async () => {
    const stack = localStack();
    await eventually(
      'the router to see the HTTP agent',
      async () => {
        const r = await fetch(`${stack.routerUrl}/v1/view/agents/${agentId}`, { headers: auth() });
        return r.ok && ((await r.json()) as { status?: string }).status === 'ONLINE';
      },
      20_000,
    );
    // The dispatcher learns the endpoint from its own view a moment later: send until one is pushed.
    const pushedWith = await eventually(
      'a push with its traceparent',
      async () => {
        const traceparent = `00-${hex(32)}-${hex(16)}-01`;
        const id = await submit({ capability, payload: { probe: true } }, traceparent);
        const push = await eventually('this push', () => pushes.find((p) => (p.body.message as { message_id?: string }).message_id === id), 3_000).catch(
          () => undefined,
        );
        return push ? { push, traceparent } : undefined;
      },
      30_000,
      0,
    );
    expect(pushedWith.push.headers.traceparent).toBe(pushedWith.traceparent);
    expect(pushedWith.push.body).toMatchObject({ type: 'deliver', traceparent: pushedWith.traceparent });
  });
});
