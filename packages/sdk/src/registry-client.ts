import { ReachError } from '@reach/core';
import { joinUrl, listOf, requestJson } from './http.js';
import type { ClientTls } from './tls.js';
import type { AgentDescriptor, LoadReport, Registration } from './types.js';

/** One agent as the registry lists it (docs/design.md §3 `GET /v1/agents`); fields beyond these pass through. */
export interface AgentInfo {
  agent_id: string;
  agent_type?: string;
  status?: string;
  capabilities?: Array<{ name: string; mode?: string; version?: string | null; tags?: string[] } | string>;
  metadata?: Record<string, unknown>;
  load?: Partial<LoadReport>;
  qos?: number;
  [key: string]: unknown;
}

export interface AgentQuery {
  capability?: string;
  status?: string;
  domain?: string;
}

/** The registry's agent API (docs/design.md §3): register, heartbeat, deregister, list, show. */
export class RegistryClient {
  constructor(
    readonly url: string,
    private readonly timeoutMs = 10_000,
    private readonly tls?: ClientTls,
  ) {}

  /** `POST /v1/agents` with the enrollment (or admin) token when one is needed. */
  async register(descriptor: AgentDescriptor, token?: string): Promise<Registration> {
    const res = await requestJson<Partial<Registration>>(joinUrl(this.url, '/v1/agents'), {
      method: 'POST',
      token,
      body: descriptor,
      timeoutMs: this.timeoutMs,
      tls: this.tls,
    });
    const r = res.body;
    if (!r || typeof r.agent_id !== 'string' || typeof r.token !== 'string') {
      throw new ReachError('INTERNAL', `registry answered ${res.status} without agent_id and token`);
    }
    const ttl = typeof r.ttl_s === 'number' ? r.ttl_s : (descriptor.ttl_s ?? 60);
    const reg: Registration = {
      agent_id: r.agent_id,
      lease_id: typeof r.lease_id === 'string' ? r.lease_id : '',
      token: r.token,
      ttl_s: ttl,
      heartbeat_interval_ms: typeof r.heartbeat_interval_ms === 'number' && r.heartbeat_interval_ms > 0 ? r.heartbeat_interval_ms : (ttl * 1000) / 2,
    };
    if (Array.isArray(r.warnings)) reg.warnings = r.warnings.filter((w) => w && typeof w.message === 'string');
    return reg;
  }

  async heartbeat(agentId: string, token: string, load: LoadReport): Promise<void> {
    await requestJson(joinUrl(this.url, `/v1/agents/${encodeURIComponent(agentId)}/heartbeat`), {
      method: 'POST',
      token,
      body: load,
      timeoutMs: this.timeoutMs,
      tls: this.tls,
    });
  }

  /** `DELETE /v1/agents/{id}`; an agent the registry no longer knows counts as deregistered. */
  async deregister(agentId: string, token: string): Promise<void> {
    await requestJson(joinUrl(this.url, `/v1/agents/${encodeURIComponent(agentId)}`), {
      method: 'DELETE',
      token,
      timeoutMs: this.timeoutMs,
      tls: this.tls,
      accept: [404, 410],
    });
  }

  async list(query: AgentQuery = {}, token?: string): Promise<AgentInfo[]> {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (typeof v === 'string' && v !== '') qs.set(k, v);
    const q = qs.toString();
    const res = await requestJson(joinUrl(this.url, `/v1/agents${q ? `?${q}` : ''}`), { token, timeoutMs: this.timeoutMs, tls: this.tls });
    return listOf<AgentInfo>(res.body, 'agents');
  }

  async get(agentId: string, token?: string): Promise<AgentInfo> {
    const res = await requestJson<AgentInfo & { agent?: AgentInfo }>(joinUrl(this.url, `/v1/agents/${encodeURIComponent(agentId)}`), {
      token,
      timeoutMs: this.timeoutMs,
      tls: this.tls,
    });
    const body = res.body;
    return body.agent && typeof body.agent === 'object' ? body.agent : body;
  }
}
