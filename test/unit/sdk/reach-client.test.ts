import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ReachClient, ReachError } from '@reach/sdk';

// ReachClient's HTTP mapping against a small fake of the docs/design.md §3 message API: the request it
// builds (path, query, headers, body) and how answers and error bodies come back.

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: unknown;
}

let server: Server;
let base = '';
const seen: Seen[] = [];
let next: { status: number; body: unknown; headers?: Record<string, string> } = { status: 200, body: {} };

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString();
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: text ? JSON.parse(text) : undefined });
      res.writeHead(next.status, { 'content-type': 'application/json', ...next.headers });
      res.end(JSON.stringify(next.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const client = () => new ReachClient({ ingressUrl: base, registryUrl: base, token: 'tok' });

describe('ReachClient', () => {
  it('submits with the bearer token, Idempotency-Key and wait_ms', async () => {
    next = { status: 200, body: { message_id: 'msg_1', status: 'DELIVERED', result: { status: 'ok', payload: 42 } } };
    const out = await client().submit({ capability: 'calc', payload: { x: 1 } }, { idempotencyKey: 'k-1', waitMs: 5000 });
    const req = seen.at(-1)!;
    expect(req.method).toBe('POST');
    expect(req.url).toBe('/v1/messages?wait_ms=5000');
    expect(req.headers.authorization).toBe('Bearer tok');
    expect(req.headers['idempotency-key']).toBe('k-1');
    expect(req.body).toEqual({ capability: 'calc', payload: { x: 1 } });
    expect(out).toEqual({ message_id: 'msg_1', status: 'DELIVERED', result: { status: 'ok', payload: 42 }, http_status: 200 });
  });

  it('returns 202 PENDING without waiting', async () => {
    next = { status: 202, body: { message_id: 'msg_2', status: 'PENDING' } };
    expect(await client().submit({ topic: 't', payload: null })).toMatchObject({ message_id: 'msg_2', status: 'PENDING', http_status: 202 });
    expect(seen.at(-1)!.url).toBe('/v1/messages');
  });

  it('throws the error body as a ReachError with its code, name and HTTP details', async () => {
    next = { status: 429, body: { error: { code: 4129, name: 'RATE_LIMITED', message: 'over quota' } }, headers: { 'retry-after': '2' } };
    const err = await client()
      .submit({ capability: 'x' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ReachError);
    expect(err).toMatchObject({
      code: 4129,
      codeName: 'RATE_LIMITED',
      retryable: true,
      message: 'over quota',
      details: { http_status: 429, retry_after: '2' },
    });
    next = { status: 504, body: { error: { code: 3002, name: 'ACK_TIMEOUT', message: 'no result in 100 ms' } } };
    await expect(client().submit({ capability: 'x' }, { waitMs: 100 })).rejects.toMatchObject({ code: 3002 });
  });

  it('maps a bare HTTP failure and an unreachable service to codes too', async () => {
    next = { status: 503, body: 'nope' };
    await expect(client().status('msg_x')).rejects.toMatchObject({ code: 5002, details: { http_status: 503 } });
    const dead = new ReachClient({ ingressUrl: 'http://127.0.0.1:1', token: 't' });
    await expect(dead.status('msg_x')).rejects.toMatchObject({ code: 5002, retryable: true });
  });

  it('reads status, the timeline and a trace', async () => {
    next = { status: 200, body: { message_id: 'msg_3', status: 'DELIVERED', attempt: 0 } };
    expect(await client().status('msg_3')).toMatchObject({ status: 'DELIVERED' });
    expect(seen.at(-1)!.url).toBe('/v1/messages/msg_3');
    next = { status: 200, body: { message_id: 'msg_3', events: [{ state: 'PENDING' }, { state: 'ROUTED' }] } };
    expect(await client().events('msg_3')).toEqual([{ state: 'PENDING' }, { state: 'ROUTED' }]);
    expect(seen.at(-1)!.url).toBe('/v1/messages/msg_3/events');
    next = { status: 200, body: [{ state: 'PENDING' }] };
    expect(await client().events('msg_3')).toEqual([{ state: 'PENDING' }]);
    next = { status: 200, body: { trace_id: 'abc', messages: [{ message_id: 'msg_3' }] } };
    expect(await client().trace('abc')).toEqual({ trace_id: 'abc', messages: [{ message_id: 'msg_3' }] });
    expect(seen.at(-1)!.url).toBe('/v1/traces/abc');
  });

  it('lists agents by capability', async () => {
    next = { status: 200, body: { agents: [{ agent_id: 'a.1', status: 'ONLINE' }] } };
    expect(await client().agents({ capability: 'query:orders' })).toEqual([{ agent_id: 'a.1', status: 'ONLINE' }]);
    expect(seen.at(-1)!.url).toBe('/v1/agents?capability=query%3Aorders');
  });
});
