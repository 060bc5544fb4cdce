import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { ReachError, toReachError, type Logger, RETRY_AFTER_HEADER } from '@reach/core';
import type { AuthFailureThrottle } from './auth-throttle.js';
import { checkAdminClientCert, type ServerTls } from './tls.js';

/**
 * A deliberately small HTTP layer: exact-path routes with `{param}` segments, JSON in and out,
 * ReachError → the public error body of docs/design.md §3. Every service serves /healthz, /readyz and
 * /metrics through it.
 */
export interface Request {
  readonly method: string;
  readonly path: string;
  readonly params: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
  readonly headers: IncomingMessage['headers'];
  /** The parsed JSON body (undefined when empty). Throws 4101 on malformed JSON. */
  json<T = unknown>(): Promise<T>;
  readonly raw: IncomingMessage;
}

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Send `body` as-is (a string) instead of JSON. */
  text?: boolean;
  /**
   * A streamed answer (Server-Sent Events): the status and headers are written, then `stream`
   * writes the body and ends it; `body` is ignored. The response closes when the promise settles.
   */
  stream?: (res: ServerResponse) => Promise<void>;
}

export type Handler = (req: Request) => Promise<Reply> | Reply;

interface Route {
  method: string;
  path: string;
  parts: string[];
  handler: Handler;
}

/** One served route, as `GET /v1/routes` lists it (the auth matrix test walks them all). */
export interface RouteEntry {
  readonly method: string;
  readonly path: string;
}

const MAX_BODY_BYTES = 1024 * 1024;
/** Past the limit the rest of a body is read and dropped (so the client gets the 413 rather than a reset connection), up to this much. */
const MAX_DISCARD_BYTES = 16 * 1024 * 1024;

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        if (size - c.length <= MAX_BODY_BYTES) {
          // the first chunk over the limit: answer now, drop what was kept
          chunks.length = 0;
          reject(new ReachError('PAYLOAD_TOO_LARGE', `request body over ${MAX_BODY_BYTES} bytes`));
        }
        if (size > MAX_DISCARD_BYTES) req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export interface ListenOptions {
  /** HTTPS (and WSS for an upgrade handler attached to nodeServer); unset: plain HTTP. */
  tls?: ServerTls | undefined;
  /** With `tls.clientCa`: the admin token is accepted only with a verified client certificate. */
  adminToken?: string | undefined;
}

export class HttpServer {
  private readonly routes: Route[] = [];
  private server: Server | undefined;
  private throttle: AuthFailureThrottle | undefined;
  private readonly unthrottled = new Set<string>();
  /** The admin token whose requests need a client certificate (mutual TLS on); undefined: off. */
  private mtlsAdminToken: string | undefined;
  /** Set by startingUntilReady: paths not served yet get 503, not 404 (see there). */
  private starting = false;

  constructor(private readonly log: Logger) {}

  /**
   * A service listens (health, readiness, metrics) before its start has registered the API
   * routes, so a client that reached a restarting ingress in that window got 404 "no route
   * /v1/messages", a refusal it does not retry (the chaos load: 149 submissions lost to the
   * sender in 3 ingress kills). Until `ready()`, a path no route serves yet answers 503 5002
   * with Retry-After: 1, which every careful client retries.
   */
  startingUntilReady(): this {
    this.starting = true;
    return this;
  }

  /** Start is over: unknown paths are 404 from now on. */
  ready(): void {
    this.starting = false;
  }

  route(method: string, path: string, handler: Handler): this {
    this.routes.push({ method, path, parts: path.split('/').filter(Boolean), handler });
    return this;
  }

  /** Every route this server serves, in registration order. */
  routeTable(): RouteEntry[] {
    return this.routes.map((r) => ({ method: r.method, path: r.path }));
  }

  /**
   * Counts every 401 against the caller's source address and refuses an address past its
   * budget (auth-throttle.ts) on every route but `exempt` ones (health, readiness, metrics:
   * probes and scrapers carry no credential to guess).
   */
  throttleAuthFailures(throttle: AuthFailureThrottle, exempt: readonly string[]): this {
    this.throttle = throttle;
    for (const p of exempt) this.unthrottled.add(p);
    return this;
  }

  /** The throttle of this server, shared with the WebSocket hello of the dispatcher. */
  get authThrottle(): AuthFailureThrottle | undefined {
    return this.throttle;
  }

  private match(method: string, path: string): { route: Route; params: Record<string, string> } | 'method' | undefined {
    const parts = path.split('/').filter(Boolean);
    let methodMismatch = false;
    for (const route of this.routes) {
      if (route.parts.length !== parts.length) continue;
      const params: Record<string, string> = {};
      let ok = true;
      for (let i = 0; i < parts.length; i++) {
        const want = route.parts[i]!;
        const have = parts[i]!;
        if (want.startsWith('{') && want.endsWith('}')) params[want.slice(1, -1)] = decodeURIComponent(have);
        else if (want !== have) {
          ok = false;
          break;
        }
      }
      if (!ok) continue;
      if (route.method !== method) {
        methodMismatch = true;
        continue;
      }
      return { route, params };
    }
    return methodMismatch ? 'method' : undefined;
  }

  private async dispatch(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const found = this.match(req.method ?? 'GET', url.pathname);
    let reply: Reply;
    // Set when the refusal is of an identity a valid token claimed, not of the token itself.
    let refusedIdentity = false;
    let refusal: Reply | undefined;
    try {
      checkAdminClientCert(req, this.mtlsAdminToken);
      if (found === undefined && this.starting) {
        const e = new ReachError('DEPENDENCY_UNAVAILABLE', `the service is starting and does not serve ${url.pathname} yet; try again`);
        reply = { status: e.httpStatus, body: e.toBody(), headers: { [RETRY_AFTER_HEADER]: '1' } };
      } else if (found === undefined) reply = { status: 404, body: { error: { code: 404, name: 'NOT_FOUND', message: `no route ${url.pathname}` } } };
      else if (found === 'method')
        reply = { status: 405, body: { error: { code: 405, name: 'METHOD_NOT_ALLOWED', message: `${req.method} not allowed on ${url.pathname}` } } };
      else if ((refusal = this.throttled(req, url.pathname))) reply = refusal;
      else {
        let body: Promise<Buffer> | undefined;
        const request: Request = {
          method: req.method ?? 'GET',
          path: url.pathname,
          params: found.params,
          query: url.searchParams,
          headers: req.headers,
          raw: req,
          json: async <T>() => {
            body ??= readBody(req);
            const buf = await body;
            if (buf.length === 0) return undefined as T;
            try {
              return JSON.parse(buf.toString('utf8')) as T;
            } catch (err) {
              throw new ReachError('INVALID_ENVELOPE', `request body is not valid JSON: ${(err as Error).message}`);
            }
          },
        };
        reply = await found.route.handler(request);
      }
    } catch (err) {
      const e = toReachError(err);
      refusedIdentity = e.codeName === 'AUTH_FAILED' && e.details?.field !== undefined;
      if (e.codeName === 'INTERNAL') this.log.error({ err }, 'request failed');
      reply = {
        status: e.httpStatus,
        body: e.toBody(),
        ...(e.codeName === 'RATE_LIMITED' && e.details?.retryAfterS ? { headers: { [RETRY_AFTER_HEADER]: String(e.details.retryAfterS) } } : {}),
      };
    }
    // A valid token naming another agent in a field (a body's `producer`) is refused 401 too, but
    // it is no guess at a credential: counted, one client's bad bodies locked its whole address
    // out (`pnpm fuzz`: 32,914 of 55,000 cases answered 429).
    if (reply.status === 401 && !refusedIdentity) this.throttle?.failed(req.socket.remoteAddress);
    if (reply.stream) {
      res.writeHead(reply.status, { ...reply.headers });
      try {
        await reply.stream(res);
      } finally {
        res.end();
      }
      return;
    }
    const isText = reply.text === true;
    const payload = reply.body === undefined ? '' : isText ? String(reply.body) : JSON.stringify(reply.body);
    res.writeHead(reply.status, {
      'content-type': isText ? 'text/plain; version=0.0.4; charset=utf-8' : 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(payload),
      ...reply.headers,
    });
    res.end(payload);
  }

  /** The 429 for an address past its failed-authentication budget, or undefined. */
  private throttled(req: IncomingMessage, path: string): Reply | undefined {
    if (!this.throttle || this.unthrottled.has(path)) return undefined;
    const retryAfterS = this.throttle.retryAfterS(req.socket.remoteAddress);
    if (retryAfterS === undefined) return undefined;
    const e = new ReachError('RATE_LIMITED', `too many failed authentications from ${req.socket.remoteAddress}: try again in ${retryAfterS} s`, {
      details: { reason: 'auth_failures', retry_after_s: retryAfterS },
    });
    return { status: 429, body: e.toBody(), headers: { [RETRY_AFTER_HEADER]: String(retryAfterS) } };
  }

  async listen(host: string, port: number, opts: ListenOptions = {}): Promise<number> {
    const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
      this.dispatch(req, res).catch((err: unknown) => {
        this.log.error({ err }, 'response failed');
        res.destroy();
      });
    };
    const tls = opts.tls;
    // Client certificates are asked for but not required (rejectUnauthorized: false): agents
    // connect with their token alone; checkAdminClientCert holds the admin token to a verified one.
    const server: Server = tls
      ? createHttpsServer(
          { cert: tls.cert, key: tls.key, ...(tls.clientCa ? { ca: tls.clientCa, requestCert: true, rejectUnauthorized: false } : {}) },
          onRequest,
        )
      : createServer(onRequest);
    this.mtlsAdminToken = tls?.clientCa ? opts.adminToken : undefined;
    server.keepAliveTimeout = 65_000;
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    return (server.address() as AddressInfo).port;
  }

  get nodeServer(): Server | undefined {
    return this.server;
  }

  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
      setTimeout(() => server.closeAllConnections(), 2000).unref();
    });
  }
}
