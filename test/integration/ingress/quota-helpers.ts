import { adminToken, urls } from '../../helpers/env.js';

// Response bodies are read field by field in assertions; their shapes are what is under test.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = Record<string, any>;

export interface Answer {
  status: number;
  body: Json;
  headers: Headers;
}

/** One HTTP call to an ingress instance (the shared one by default) with a bearer token (admin by default, null: none). */
export async function call(
  method: string,
  path: string,
  opts: { token?: string | null; body?: unknown; raw?: string; base?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...opts.headers };
  const token = opts.token === undefined ? adminToken() : opts.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  let body = opts.raw;
  if (opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${opts.base ?? urls.ingress}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Json) : {}, headers: res.headers };
}

/** PUT /v1/quotas/{agent_id} with the admin token; fails the test unless it is stored. */
export async function setQuota(agentId: string, ratePerS: number, burst: number, base?: string): Promise<Json> {
  const a = await call('PUT', `/v1/quotas/${encodeURIComponent(agentId)}`, { body: { rate_per_s: ratePerS, burst }, ...(base ? { base } : {}) });
  if (a.status !== 200) throw new Error(`PUT quota of ${agentId}: ${a.status} ${JSON.stringify(a.body)}`);
  return a.body;
}

export async function resetQuota(agentId: string): Promise<void> {
  await call('DELETE', `/v1/quotas/${encodeURIComponent(agentId)}`).catch(() => undefined);
}

/** A message nobody serves that the router parks (it has an expire_at, R-B10). */
export function parkedMessage(capability: string, n = 0): Json {
  return { capability, expire_at: new Date(Date.now() + 10 * 60_000).toISOString(), payload: { n } };
}
