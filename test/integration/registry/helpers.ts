import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { adminToken, urls } from '../../helpers/env.js';

/** The token secret of the running stack: REACH_TOKEN_SECRET, or the one `reach up` generated. */
export function tokenSecret(): string {
  if (process.env.REACH_TOKEN_SECRET) return process.env.REACH_TOKEN_SECRET;
  const home = process.env.REACH_HOME ?? join(process.cwd(), '.reach');
  return readFileSync(join(home, 'token-secret'), 'utf8').trim();
}

/** A unique lowercase word that fits the capability grammar (uniq() has hyphens, which it does not). */
export function capWord(): string {
  return `t${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
}

export interface Answer<T = Record<string, unknown>> {
  status: number;
  body: T;
}

export async function call<T = Record<string, unknown>>(
  method: string,
  path: string,
  opts: { body?: unknown; token?: string; base?: string; raw?: string } = {},
): Promise<Answer<T>> {
  const headers: Record<string, string> = {};
  if (opts.body !== undefined || opts.raw !== undefined) headers['content-type'] = 'application/json';
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  const res = await fetch(`${opts.base ?? urls.registry}${path}`, {
    method,
    headers,
    ...(opts.raw !== undefined ? { body: opts.raw } : opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
}

export interface Registered {
  agent_id: string;
  lease_id: string;
  token: string;
  ttl_s: number;
  heartbeat_interval_ms: number;
  lease_expires_at: string;
  warnings?: Array<{ field: string; message: string }>;
}

/** Registers (as the admin unless told otherwise) and expects 201. */
export async function register(body: Record<string, unknown>, token: string | null = adminToken(), base?: string): Promise<Registered> {
  const res = await call<Registered>('POST', '/v1/agents', { body, ...(token ? { token } : {}), ...(base ? { base } : {}) });
  if (res.status !== 201) throw new Error(`register answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body;
}

export interface AgentJson {
  agent_id: string;
  agent_type: string;
  status: string;
  revision: number;
  lease_id: string;
  lease_expires_at: string;
  lease_valid: boolean;
  ttl_s: number;
  capabilities: Array<{ name: string; version: string | null; mode: string; tags: string[]; consumption: string; scope: unknown; constraints: unknown }>;
  metadata: { max_concurrency: number; region: string | null; domain: string; weight: number };
  load: { current_load: number; queue_length: number; avg_latency_ms: number; health: number; load_rate: number };
  qos: number;
  registered_at: string;
  updated_at: string;
}

/** An agent as the admin sees it (listings need a token: docs/access-control.md). */
export async function getAgent(id: string, base?: string): Promise<Answer<AgentJson>> {
  return call<AgentJson>('GET', `/v1/agents/${encodeURIComponent(id)}`, { token: adminToken(), ...(base ? { base } : {}) });
}

/** The agents the admin sees. */
export async function listAgents(query: Record<string, string>, base?: string): Promise<AgentJson[]> {
  const res = await call<{ agents: AgentJson[] }>('GET', `/v1/agents?${new URLSearchParams(query).toString()}`, {
    token: adminToken(),
    ...(base ? { base } : {}),
  });
  if (res.status !== 200) throw new Error(`list answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.agents;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls until `fn` returns a value that satisfies `pred`, or fails after `timeoutMs`. */
export async function eventually<T>(fn: () => Promise<T>, pred: (v: T) => boolean, timeoutMs = 10_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T;
  for (;;) {
    last = await fn();
    if (pred(last)) return last;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms; last value: ${JSON.stringify(last)}`);
    await sleep(everyMs);
  }
}
