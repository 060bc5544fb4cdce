import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { HttpServer } from '@reach/service-kit';

// A service listens (health, readiness) before its start has registered its API routes. A
// restarting ingress answered POST /v1/messages with 404 "no route" in that window, a refusal
// no client retries; while starting, a path not served yet is 503 5002 with Retry-After.
const servers: HttpServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

async function serve(http: HttpServer): Promise<string> {
  servers.push(http);
  http.route('GET', '/healthz', () => ({ status: 200, body: { status: 'ok' } }));
  const port = await http.listen('127.0.0.1', 0);
  return `http://127.0.0.1:${port}`;
}

describe('HttpServer while its service starts', () => {
  it('answers a path not served yet with 503 5002 and Retry-After: 1 until ready, then 404', async () => {
    const http = new HttpServer(silentLogger).startingUntilReady();
    const base = await serve(http);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);

    const early = await fetch(`${base}/v1/messages`, { method: 'POST', body: '{}' });
    expect(early.status).toBe(503);
    expect(early.headers.get('retry-after')).toBe('1');
    expect(((await early.json()) as { error: { code: number } }).error.code).toBe(5002);

    http.route('POST', '/v1/messages', () => ({ status: 202, body: {} }));
    http.ready();
    expect((await fetch(`${base}/v1/messages`, { method: 'POST', body: '{}' })).status).toBe(202);
    expect((await fetch(`${base}/v1/nothing-here`)).status).toBe(404);
  });

  it('answers 404 at once when it was never told it is starting', async () => {
    const base = await serve(new HttpServer(silentLogger));
    expect((await fetch(`${base}/v1/nothing-here`)).status).toBe(404);
  });
});
