import { ReachError, RETRY_AFTER_HEADER } from '@reach/core';
import type { FetchFn } from '@reach/sdk';
import type { HttpServer, Reply, Request } from '@reach/service-kit';
import type { UpstreamName } from './upstreams.js';

/**
 * The page calls same-origin `/api/<service>/<path>`; the console forwards exactly these
 * public endpoints (docs/design.md §3) and nothing else, with the caller's own Authorization header.
 * The console holds no token: what an operator may see or replay is what their token allows.
 * No cookies are involved, so another site cannot make a browser replay anything.
 */
export interface ProxyRoute {
  method: 'GET' | 'POST';
  upstream: UpstreamName;
  path: string;
}

export const PROXY_ROUTES: readonly ProxyRoute[] = [
  { method: 'GET', upstream: 'registry', path: '/v1/agents' },
  { method: 'GET', upstream: 'registry', path: '/v1/agents/{id}' },
  { method: 'GET', upstream: 'ingress', path: '/v1/messages/{id}' },
  { method: 'GET', upstream: 'ingress', path: '/v1/messages/{id}/events' },
  { method: 'GET', upstream: 'ingress', path: '/v1/traces/{trace_id}' },
  { method: 'GET', upstream: 'dead-letter', path: '/v1/dlq' },
  { method: 'GET', upstream: 'dead-letter', path: '/v1/dlq/{id}' },
  { method: 'POST', upstream: 'dead-letter', path: '/v1/dlq/{id}/replay' },
  { method: 'GET', upstream: 'router', path: '/v1/view/agents/{id}' },
  { method: 'GET', upstream: 'registry', path: '/v1/audit' },
];

const TIMEOUT_MS = 10_000;

async function forward(req: Request, base: string, prefix: string, upstream: UpstreamName, fetchUpstream: FetchFn): Promise<Reply> {
  const query = req.query.toString();
  const target = `${base}${req.path.slice(prefix.length)}${query ? `?${query}` : ''}`;
  const headers: Record<string, string> = { accept: 'application/json' };
  const auth = req.headers.authorization;
  if (typeof auth === 'string') headers.authorization = auth;
  let body: string | undefined;
  if (req.method === 'POST') {
    const parsed = await req.json();
    if (parsed !== undefined) {
      body = JSON.stringify(parsed);
      headers['content-type'] = 'application/json';
    }
  }
  let res: Response;
  try {
    res = await fetchUpstream(target, { method: req.method, headers, ...(body !== undefined ? { body } : {}), signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch (err) {
    throw new ReachError('DEPENDENCY_UNAVAILABLE', `${upstream} did not answer at ${base}: ${(err as Error).message}`, { cause: err });
  }
  const text = await res.text();
  const out: Record<string, string> = { 'content-type': res.headers.get('content-type') ?? 'application/json; charset=utf-8', 'cache-control': 'no-store' };
  const retryAfter = res.headers.get(RETRY_AFTER_HEADER);
  if (retryAfter) out[RETRY_AFTER_HEADER] = retryAfter;
  return { status: res.status, body: text, text: true, headers: out };
}

export function registerProxy(http: HttpServer, upstreams: Readonly<Record<UpstreamName, string>>, fetchUpstream: FetchFn): void {
  for (const route of PROXY_ROUTES) {
    const prefix = `/api/${route.upstream}`;
    http.route(route.method, `${prefix}${route.path}`, (req) => forward(req, upstreams[route.upstream], prefix, route.upstream, fetchUpstream));
  }
}
