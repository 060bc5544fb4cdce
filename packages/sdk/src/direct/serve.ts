import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ReachError, errorInfo, ERROR, IDEMPOTENCY_KEY_HEADER } from '@reach/core';
import { WebSocketServer, type WebSocket } from 'ws';
import { CLOSE } from '../agent-socket.js';
import { LocalReach, type LocalConnection } from './local-reach.js';

/**
 * A LocalReach served over the public wire (docs/design.md §3 and §4) on one port, for agents that are
 * not in this process — the Python SDK's direct mode runs one as its child — and for tools:
 *
 *   registry   POST /v1/agents · POST /v1/agents/{id}/heartbeat · DELETE /v1/agents/{id} · GET /v1/agents[/{id}]
 *   dispatcher ws://…/v1/connect (hello → welcome, deliver, ack/reject/result/progress/send, ping)
 *   ingress    POST /v1/messages[?wait_ms=] · GET /v1/messages/{id} · GET /v1/messages/{id}/events
 *   test       POST /v1/local/skip {ms} · POST /v1/local/lose-answers {agent_id, deliveries}
 *              POST /v1/local/drop-connection {agent_id} · GET /v1/local/routes/{agent_id}
 *              (what the agent can reach: the view its `routes` frames follow) · GET /healthz
 *
 * Same frames, same JSON, same error bodies: what differs from the stack is only what runs
 * behind them (one LocalReach instead of Kafka and the services).
 */
export interface ServedLocalReach {
  /** http://host:port — the registry, ingress and dispatcher base URL at once. */
  readonly url: string;
  readonly reach: LocalReach;
  close(): Promise<void>;
}

interface Reply {
  status: number;
  body?: unknown;
}

function errorReply(err: unknown): Reply {
  const e = err instanceof ReachError ? err : new ReachError('INTERNAL', err instanceof Error ? err.message : String(err));
  const status = typeof e.details?.http_status === 'number' ? e.details.http_status : errorInfo(e.code).httpStatus;
  return { status, body: { error: { code: e.code, name: e.codeName, message: e.message, ...(e.details ? { details: e.details } : {}) } } };
}

async function jsonBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  if (text === '') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ReachError('INVALID_ENVELOPE', 'the body is not JSON', { details: { http_status: 400 } });
  }
}

function bearer(req: IncomingMessage): string | undefined {
  const h = req.headers.authorization;
  return h?.startsWith('Bearer ') ? h.slice('Bearer '.length) : undefined;
}

const notFound = (what: string): Reply => ({
  status: 404,
  body: { error: { code: ERROR.INVALID_ENVELOPE, name: 'INVALID_ENVELOPE', message: `${what} not found` } },
});

async function route(reach: LocalReach, req: IncomingMessage): Promise<Reply> {
  const url = new URL(req.url ?? '/', 'http://local');
  const path = url.pathname
    .split('/')
    .filter((p) => p !== '')
    .map(decodeURIComponent);
  const method = req.method ?? 'GET';
  const token = bearer(req);
  const is = (m: string, ...parts: Array<string | null>): boolean =>
    method === m && path.length === parts.length && parts.every((p, i) => p === null || p === path[i]);

  if (is('GET', 'healthz') || is('GET', 'readyz')) return { status: 200, body: { ok: true, mode: 'direct' } };
  // registry
  if (is('POST', 'v1', 'agents')) return { status: 201, body: reach.register(await jsonBody(req)) };
  if (is('POST', 'v1', 'agents', null, 'heartbeat')) {
    reach.heartbeat(path[2]!, token ?? '', (await jsonBody(req)) as never);
    return { status: 200, body: { agent_id: path[2] } };
  }
  if (is('DELETE', 'v1', 'agents', null)) {
    if (!reach.agents().some((a) => a.agent_id === path[2])) return notFound(`agent ${path[2]}`);
    reach.deregister(path[2]!, token ?? '');
    return { status: 204 };
  }
  if (is('GET', 'v1', 'agents')) {
    const q = (k: string) => url.searchParams.get(k) ?? undefined;
    return { status: 200, body: { agents: reach.agents({ capability: q('capability'), status: q('status'), domain: q('domain') }) } };
  }
  if (is('GET', 'v1', 'agents', null)) {
    const agent = reach.agents().find((a) => a.agent_id === path[2]);
    return agent ? { status: 200, body: agent } : notFound(`agent ${path[2]}`);
  }
  // ingress
  if (is('POST', 'v1', 'messages')) {
    const body = (await jsonBody(req)) as Record<string, unknown>;
    const key = req.headers[IDEMPOTENCY_KEY_HEADER];
    const fields = typeof key === 'string' ? { ...body, idempotency_key: key } : body;
    const waitMs = url.searchParams.has('wait_ms') ? Number(url.searchParams.get('wait_ms')) : undefined;
    const producer = reach.agentOfToken(token);
    const row = await reach.submit(fields, { ...(producer ? { producer } : {}), ...(waitMs === undefined ? {} : { waitMs }) });
    if (waitMs !== undefined) return { status: 200, body: row };
    return { status: 202, body: { message_id: row.message_id, status: row.status } };
  }
  if (is('GET', 'v1', 'messages', null)) {
    const row = reach.status(path[2]!);
    return row ? { status: 200, body: row } : notFound(`message ${path[2]}`);
  }
  if (is('GET', 'v1', 'messages', null, 'events')) {
    const events = reach.events(path[2]!);
    return events.length > 0 ? { status: 200, body: { message_id: path[2], events } } : notFound(`message ${path[2]}`);
  }
  // what tests do to the control plane
  if (is('POST', 'v1', 'local', 'skip')) {
    const { ms } = (await jsonBody(req)) as { ms?: unknown };
    await reach.skipTime(Number(ms));
    return { status: 200, body: { skipped_ms: reach.clock.skipped } };
  }
  if (is('POST', 'v1', 'local', 'lose-answers')) {
    const { agent_id: agentId, deliveries } = (await jsonBody(req)) as { agent_id?: unknown; deliveries?: unknown };
    reach.loseAnswers(String(agentId), typeof deliveries === 'number' ? deliveries : 1);
    return { status: 200, body: {} };
  }
  if (is('POST', 'v1', 'local', 'drop-connection')) {
    const { agent_id: agentId } = (await jsonBody(req)) as { agent_id?: unknown };
    return { status: 200, body: { dropped: reach.dropConnection(String(agentId)) } };
  }
  if (is('GET', 'v1', 'local', 'routes', null)) {
    if (!reach.agents().some((a) => a.agent_id === path[3])) return notFound(`agent ${path[3]}`);
    return { status: 200, body: reach.routesFor(path[3]!) };
  }
  return notFound(`${method} ${url.pathname}`);
}

/** One WebSocket: the first frame must be `hello`; then frames go both ways as text. */
function serveSocket(reach: LocalReach, ws: WebSocket): void {
  let conn: LocalConnection | undefined;
  ws.on('message', (data) => {
    const text = String(data);
    if (conn) {
      conn.send(text);
      return;
    }
    let hello: { type?: unknown; agent_id?: unknown; token?: unknown; last_seq?: unknown };
    try {
      hello = JSON.parse(text) as typeof hello;
    } catch {
      ws.close(CLOSE.authFailed, 'the first frame must be hello');
      return;
    }
    if (hello.type !== 'hello' || typeof hello.agent_id !== 'string' || typeof hello.token !== 'string') {
      ws.close(CLOSE.authFailed, 'the first frame must be hello');
      return;
    }
    try {
      conn = reach.connect(
        { agent_id: hello.agent_id, token: hello.token, ...(typeof hello.last_seq === 'number' ? { last_seq: hello.last_seq } : {}) },
        // 1006 is no close code to send: a dropped connection is a socket torn down (the peer sees 1006).
        { push: (frame) => ws.send(frame), close: (code, reason) => (code === 1006 ? ws.terminate() : ws.close(code, reason)) },
      );
    } catch {
      // connect() already wrote the error frame and closed
    }
  });
  ws.on('close', () => conn?.close());
}

export async function serveLocalReach(reach: LocalReach, options: { host?: string; port?: number } = {}): Promise<ServedLocalReach> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    route(reach, req)
      .catch(errorReply)
      .then((reply) => {
        res.writeHead(reply.status, reply.body === undefined ? {} : { 'content-type': 'application/json' });
        res.end(reply.body === undefined ? undefined : JSON.stringify(reply.body));
      })
      .catch(() => res.destroy());
  });
  const wss = new WebSocketServer({ server, path: '/v1/connect' });
  wss.on('connection', (ws) => serveSocket(reach, ws));
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${options.host ?? '127.0.0.1'}:${port}`,
    reach,
    close: async () => {
      reach.close();
      for (const ws of wss.clients) ws.terminate();
      wss.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
