import { seededRandom } from '@reach/core';
import type { AgentRecord, Capability, Envelope, Presence } from '@reach/envelope';
import { AgentIndex, MemoryStickyStore, type RouteDecision, type RouteDeps, type RouteHints, type RoutingConfig, type StickyStore } from '@reach/routing';

/** Deterministic draws for statistical tests (the shared mulberry32 of @reach/core). */
export const seeded = seededRandom;

export const NOW = Date.UTC(2025, 5, 1, 12, 0, 0);

export function cap(name: string, overrides: Partial<Capability> = {}): Capability {
  return { name, version: null, mode: 'handle', tags: [], consumption: 'single', scope_json: null, constraints_json: null, ...overrides };
}

export interface AgentOpts {
  caps?: Capability[];
  status?: AgentRecord['status'];
  revision?: number;
  leaseExpiresAt?: number;
  http?: string | null;
  maxConcurrency?: number;
  currentLoad?: number;
  health?: number;
  weight?: number;
  region?: string | null;
}

export function agent(id: string, o: AgentOpts = {}): AgentRecord {
  return {
    agent_id: id,
    agent_type: 'test',
    status: o.status ?? 'ONLINE',
    revision: o.revision ?? 1,
    lease_id: `lease-${id}`,
    lease_expires_at: o.leaseExpiresAt ?? NOW + 60_000,
    ttl_s: 60,
    endpoints: { ws: null, http: o.http ?? null, protocol_version: '1' },
    capabilities: o.caps ?? [cap('parse_pdf')],
    metadata: {
      max_concurrency: o.maxConcurrency ?? 10,
      region: o.region ?? null,
      timezone: null,
      model: null,
      domain: 'default',
      weight: o.weight ?? 1,
      extra: {},
    },
    load: { current_load: o.currentLoad ?? 0, queue_length: 0, avg_latency_ms: 0, health: o.health ?? 1 },
    qos: 1,
    registered_at: NOW - 1000,
    updated_at: NOW - 1000,
  };
}

export function connected(id: string, at = NOW - 500): Presence {
  return { agent_id: id, connected: true, dispatcher_instance: 'dispatcher-1', connection_id: `conn-${id}`, at };
}

/** An index holding the agents, each connected to a dispatcher. */
export function indexOf(...agents: AgentRecord[]): AgentIndex {
  const index = new AgentIndex();
  for (const a of agents) {
    index.upsertAgent(a);
    index.setPresence(connected(a.agent_id));
  }
  return index;
}

export function envelope(overrides: Partial<Envelope> = {}): Envelope {
  return {
    message_id: 'msg_01J0000000000000000000000A',
    message_type: 'task_request',
    capability: 'parse_pdf',
    topic: null,
    target_agent_id: null,
    producer: 'agent.producer',
    trace_id: 'trace-1',
    request_id: null,
    idempotency_key: null,
    session_id: null,
    correlation_id: null,
    reply_to: null,
    priority: 'NORMAL',
    tags: [],
    retryable: true,
    timeout_ms: null,
    created_at: NOW - 10,
    expire_at: null,
    schema_version: 1,
    content_type: 'application/json',
    payload: Buffer.from('{}'),
    headers: {},
    ...overrides,
  };
}

export const CONFIG: RoutingConfig = {
  weightPriority: 0.4,
  weightHealth: 0.3,
  weightLoad: 0.2,
  weightLocality: 0.1,
  jitter: 0,
  region: '',
  hotspotCandidates: 20,
  topK: 5,
  saturation: 0.8,
  stickyTtlS: 1800,
};

export function deps(index: AgentIndex, o: { config?: Partial<RoutingConfig>; sticky?: StickyStore; rng?: () => number } = {}): RouteDeps {
  return { index, config: { ...CONFIG, ...o.config }, sticky: o.sticky ?? new MemoryStickyStore(), rng: o.rng ?? seeded(1) };
}

/** A sticky store whose backend is down: every call fails, like Redis unreachable. */
export class DownStickyStore implements StickyStore {
  calls = 0;
  get(): Promise<string | null> {
    this.calls++;
    return Promise.reject(new Error('redis is reconnecting'));
  }
  set(): Promise<void> {
    this.calls++;
    return Promise.reject(new Error('redis is reconnecting'));
  }
}

/** Routing hints of a first attempt with nothing asked for, overridden by `o`. */
export const hints = (o: Partial<RouteHints> = {}): RouteHints => ({
  attempt: 0,
  excludeAgents: [],
  preferredAgent: undefined,
  rejectOnSaturation: false,
  capabilityTags: [],
  ...o,
});

/** The agent a decision routed to; throws for any other decision. */
export function chosen(d: RouteDecision): string {
  if (d.kind !== 'routed') throw new Error(`expected routed, got ${d.kind}`);
  return d.agentId;
}
