import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { WebSocketServer, type WebSocket } from 'ws';
import { newMessageId, signToken } from '@reach/core';

/**
 * An in-process stand-in for the registry's agent API (docs/design.md §3) and the dispatcher's
 * WebSocket protocol (docs/design.md §4), just faithful enough to unit-test the SDK's own behaviour:
 * backoff, dedupe, the concurrency limit, frame handling, token refresh. It records every
 * request and frame so tests can assert on what the SDK sent. Integration tests use the
 * real services instead.
 */
export type Frame = Record<string, unknown> & { type: string };

export interface Hello {
  agent_id: string;
  token: string;
  last_seq?: number;
  socket: WebSocket;
}

const SECRET = 'fake-reach-secret-0123456789';

export class FakeReach {
  readonly registrations: Array<{ body: Record<string, unknown>; auth: string | undefined; agent_id: string; token: string }> = [];
  readonly heartbeats: Array<{ agent_id: string; auth: string | undefined; body: Record<string, unknown> }> = [];
  readonly deregistrations: Array<{ agent_id: string; auth: string | undefined }> = [];
  readonly agentQueries: Array<{ capability: string | null; auth: string | undefined }> = [];
  readonly hellos: Hello[] = [];
  /** Every frame an agent sent, with the socket it came on. */
  readonly frames: Array<{ frame: Frame; socket: WebSocket }> = [];
  /** What GET /v1/agents answers, by capability. */
  readonly agentsByCapability = new Map<string, Array<Record<string, unknown>>>();
  /** Lifetime of the tokens it issues. */
  tokenTtlS = 3600;
  /** Like the dispatcher: a hello closes the agent's older connections with 4001 before its welcome. */
  closeOlderOnHello = false;
  /** When set, the next heartbeats answer with this status. */
  heartbeatStatus = 204;
  /** When set, answers send frames with accepted (default) or this error. */
  sendError: { code: number; name: string; message: string } | undefined;
  autoAcceptSends = true;
  welcomeHeartbeatMs = 15_000;
  /** Refuse registrations whose bearer is an agent token (as the registry does for a revoked one). */
  refuseAgentTokens = false;
  private http!: Server;
  private wss!: WebSocketServer;
  private seq = 0;
  private waiters: Array<() => void> = [];
  registryUrl = '';
  dispatcherUrl = '';

  async start(): Promise<this> {
    this.http = createServer((req, res) => void this.onHttp(req, res));
    this.wss = new WebSocketServer({ server: this.http, path: '/v1/connect' });
    this.wss.on('connection', (ws) => this.onSocket(ws));
    await new Promise<void>((resolve) => this.http.listen(0, '127.0.0.1', resolve));
    const port = (this.http.address() as AddressInfo).port;
    this.registryUrl = `http://127.0.0.1:${port}`;
    this.dispatcherUrl = `ws://127.0.0.1:${port}`;
    return this;
  }

  async stop(): Promise<void> {
    for (const ws of this.wss.clients) ws.terminate();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
    this.http.closeAllConnections();
    await new Promise<void>((resolve) => this.http.close(() => resolve()));
  }

  issueToken(agentId: string): string {
    const now = Math.floor(Date.now() / 1000);
    return signToken({ sub: agentId, jti: randomBytes(6).toString('hex'), iat: now, exp: now + this.tokenTtlS, dom: 'default' }, SECRET);
  }

  /** The socket of the newest hello. */
  get socket(): WebSocket | undefined {
    return this.hellos.at(-1)?.socket;
  }

  /** Sends a deliver frame on the newest connection; returns its seq. */
  deliver(message: Record<string, unknown>, opts: { seq?: number; attempt?: number; deadline?: string | number; socket?: WebSocket } = {}): number {
    const seq = opts.seq ?? ++this.seq;
    if (seq > this.seq) this.seq = seq;
    const full = {
      message_id: newMessageId(),
      message_type: 'task_request',
      producer: 'agent.sender',
      trace_id: randomBytes(16).toString('hex'),
      created_at: new Date().toISOString(),
      content_type: 'application/json',
      headers: {},
      ...message,
    };
    const frame: Record<string, unknown> = { type: 'deliver', seq, attempt: opts.attempt ?? 0, message: full };
    frame.deadline = opts.deadline ?? new Date(Date.now() + 60_000).toISOString();
    (opts.socket ?? this.socket)!.send(JSON.stringify(frame));
    return seq;
  }

  sendRaw(frame: unknown, socket: WebSocket | undefined = this.socket): void {
    socket!.send(JSON.stringify(frame));
  }

  framesOf(type: string): Frame[] {
    return this.frames.filter((f) => f.frame.type === type).map((f) => f.frame);
  }

  /** Resolves when `pred` holds (checked on every recorded event), or rejects after `timeoutMs`. */
  async until<T>(what: string, pred: () => T | undefined | false, timeoutMs = 5000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = pred();
      if (v) return v;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 50));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  private notify(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  private async onHttp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString();
    const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    const auth = req.headers.authorization;
    const url = new URL(req.url ?? '/', 'http://x');
    const send = (status: number, out?: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(out === undefined ? '' : JSON.stringify(out));
      this.notify();
    };
    const parts = url.pathname.split('/').filter(Boolean);
    if (req.method === 'POST' && url.pathname === '/v1/agents') {
      if (this.refuseAgentTokens && auth?.startsWith('Bearer rt1.')) {
        this.registrations.push({ body, auth, agent_id: '', token: '' });
        send(401, { error: { code: 1003, name: 'AUTH_FAILED', message: 'token revoked' } });
        return;
      }
      const agentId = typeof body.agent_id === 'string' ? body.agent_id : `fake.${randomBytes(4).toString('hex')}`;
      const token = this.issueToken(agentId);
      this.registrations.push({ body, auth, agent_id: agentId, token });
      send(201, { agent_id: agentId, lease_id: `lease_${this.registrations.length}`, token, ttl_s: 60, heartbeat_interval_ms: 100 });
      return;
    }
    if (req.method === 'POST' && parts[0] === 'v1' && parts[1] === 'agents' && parts[3] === 'heartbeat') {
      this.heartbeats.push({ agent_id: parts[2]!, auth, body });
      if (this.heartbeatStatus >= 400) send(this.heartbeatStatus, { error: { code: 1003, name: 'AUTH_FAILED', message: 'lease gone' } });
      else send(204);
      return;
    }
    if (req.method === 'DELETE' && parts[1] === 'agents' && parts[2]) {
      this.deregistrations.push({ agent_id: parts[2], auth });
      send(204);
      return;
    }
    if (req.method === 'GET' && url.pathname === '/v1/agents') {
      const capability = url.searchParams.get('capability');
      this.agentQueries.push({ capability, auth });
      send(200, { agents: this.agentsByCapability.get(capability ?? '') ?? [] });
      return;
    }
    send(404, { error: { code: 5001, name: 'INTERNAL', message: `no route ${req.method} ${url.pathname}` } });
  }

  private onSocket(ws: WebSocket): void {
    ws.on('message', (data) => {
      const frame = JSON.parse(String(data)) as Frame;
      this.frames.push({ frame, socket: ws });
      if (frame.type === 'hello') {
        // The real dispatcher reads Redis between the two, so the agent may see its older
        // connection closed before the newer one is welcomed: the fake waits for that close.
        const older = this.closeOlderOnHello ? this.hellos.filter((h) => h.agent_id === String(frame.agent_id) && h.socket.readyState === h.socket.OPEN) : [];
        for (const h of older) h.socket.close(4001, 'replaced by a newer connection');
        this.hellos.push({ agent_id: String(frame.agent_id), token: String(frame.token), last_seq: frame.last_seq as number | undefined, socket: ws });
        const connectionId = `conn_${this.hellos.length}`;
        void Promise.all(older.map((h) => new Promise((r) => h.socket.once('close', r))))
          .then(() => new Promise((r) => setTimeout(r, older.length > 0 ? 50 : 0)))
          .then(() =>
            ws.send(JSON.stringify({ type: 'welcome', connection_id: connectionId, heartbeat_ms: this.welcomeHeartbeatMs, resume_from: frame.last_seq ?? 0 })),
          );
      } else if (frame.type === 'send' && this.autoAcceptSends) {
        if (this.sendError) ws.send(JSON.stringify({ type: 'error', client_ref: frame.client_ref, ...this.sendError }));
        else ws.send(JSON.stringify({ type: 'accepted', client_ref: frame.client_ref, message_id: frame.message_id ?? newMessageId() }));
      }
      this.notify();
    });
    ws.on('close', () => this.notify());
  }
}

/** A promise with its resolver, for handlers a test releases by hand. */
export function gate<T = void>(): { promise: Promise<T>; open: (v: T) => void } {
  let open!: (v: T) => void;
  const promise = new Promise<T>((resolve) => (open = resolve));
  return { promise, open };
}
