import { ReachError, newId } from '@reach/core';
import {
  agentRecordToJson,
  healthValue,
  heartbeatIntervalMs,
  leaseDurationMs,
  offersCapability,
  qosScore,
  statusForLoad,
  validateDescriptor,
  type DescriptorRules,
} from '@reach/agents';
import type { AgentRecord, Capability } from '@reach/envelope';
import { AgentIndex, GrantIndex, type DomainGrant } from '@reach/routing';
import type { AgentInfo, AgentQuery } from '../registry-client.js';
import type { LoadReport, Registration } from '../types.js';
import type { BusClock } from './clock.js';

export interface RegistryConfig {
  agentTtlS: number;
  missedHeartbeats: number;
  cooldownQos: number;
  maxCapabilities: number;
}

function notFound(agentId: string): ReachError {
  return new ReachError('INVALID_REGISTRATION', `agent ${agentId} is not registered`, { details: { http_status: 404, agent_id: agentId } });
}

/**
 * The registry of direct mode: the descriptor checked by the same rules (@reach/agents
 * validateDescriptor: 4104 with the field), the same records, leases, QoS and COOLDOWN from
 * heartbeats, and the router's AgentIndex fed directly instead of through reach.agents.v1.
 * Tokens are opaque strings: direct mode has no authentication to test.
 */
export class LocalRegistry {
  readonly index = new AgentIndex();
  readonly grants: GrantIndex;
  private readonly tokens = new Map<string, string>();
  private revision = 0;

  constructor(
    private readonly config: RegistryConfig,
    private readonly clock: BusClock,
    grants: readonly DomainGrant[],
  ) {
    this.grants = GrantIndex.of(grants);
  }

  register(body: unknown): Registration {
    const rules: DescriptorRules = { maxCapabilities: this.config.maxCapabilities, dictionary: new Set(), defaultTtlS: this.config.agentTtlS };
    const { descriptor: d, warnings } = validateDescriptor(body, rules);
    const now = this.clock.now();
    const current = this.index.agent(d.agent_id);
    const capabilities: Capability[] = d.capabilities.map((c) => ({
      name: c.name,
      version: c.version,
      mode: c.mode,
      tags: c.tags,
      consumption: c.consumption,
      scope_json: c.scope === null || c.scope === undefined ? null : JSON.stringify(c.scope),
      constraints_json: c.constraints === null || c.constraints === undefined ? null : JSON.stringify(c.constraints),
    }));
    const record: AgentRecord = {
      agent_id: d.agent_id,
      agent_type: d.agent_type,
      status: 'ONLINE',
      revision: ++this.revision,
      lease_id: newId('lease', now),
      lease_expires_at: now + leaseDurationMs(d.ttl_s, this.config.missedHeartbeats),
      ttl_s: d.ttl_s,
      endpoints: d.endpoints,
      capabilities,
      metadata: d.metadata,
      load: current?.load ?? { current_load: 0, queue_length: 0, avg_latency_ms: 0, health: 1 },
      qos: current?.qos ?? 1,
      registered_at: now,
      updated_at: now,
    };
    this.index.upsertAgent(record);
    const token = `direct-${d.agent_id}-${record.revision}`;
    this.tokens.set(d.agent_id, token);
    return {
      agent_id: d.agent_id,
      lease_id: record.lease_id,
      token,
      ttl_s: d.ttl_s,
      heartbeat_interval_ms: heartbeatIntervalMs(d.ttl_s),
      ...(warnings.length > 0 ? { warnings } : {}),
    };
  }

  /** Load, QoS, status and lease as the registry's heartbeat sets them (R-A5). */
  heartbeat(agentId: string, load: LoadReport): void {
    const current = this.index.agent(agentId);
    if (!current) throw notFound(agentId);
    const parsed = {
      current_load: Math.max(0, Number(load.current_load) || 0),
      queue_length: Math.max(0, Number(load.queue_length) || 0),
      avg_latency_ms: Math.max(0, Number(load.avg_latency_ms) || 0),
      health: healthValue(load.health) ?? current.load.health,
    };
    const qos = qosScore(parsed, current.metadata.max_concurrency);
    const now = this.clock.now();
    this.index.upsertAgent({
      ...current,
      load: parsed,
      qos,
      status: statusForLoad(parsed, current.metadata.max_concurrency, this.config.cooldownQos),
      revision: ++this.revision,
      lease_expires_at: now + leaseDurationMs(current.ttl_s, this.config.missedHeartbeats),
      updated_at: now,
    });
  }

  /**
   * Time skipped is time in which a live node would have kept heartbeating: the leases of
   * connected agents move along with the clock, so a skip never makes a live agent look dead.
   */
  renewLeases(connected: (agentId: string) => boolean): void {
    const now = this.clock.now();
    for (const id of this.ids()) {
      const rec = this.index.agent(id);
      if (rec && connected(id)) this.index.upsertAgent({ ...rec, lease_expires_at: now + leaseDurationMs(rec.ttl_s, this.config.missedHeartbeats) });
    }
  }

  deregister(agentId: string): void {
    if (!this.index.agent(agentId)) throw notFound(agentId);
    this.index.removeAgent(agentId);
    this.tokens.delete(agentId);
  }

  tokenOf(agentId: string): string | undefined {
    return this.tokens.get(agentId);
  }

  agentOfToken(token: string): string | undefined {
    for (const [id, t] of this.tokens) if (t === token) return id;
    return undefined;
  }

  /** `GET /v1/agents?capability=&status=&domain=`. */
  list(query: AgentQuery = {}): AgentInfo[] {
    const now = this.clock.now();
    const out: AgentInfo[] = [];
    for (const id of this.ids()) {
      const rec = this.index.agent(id);
      if (!rec) continue;
      if (query.capability && !offersCapability(rec, query.capability)) continue;
      if (query.status && rec.status !== query.status) continue;
      if (query.domain && (rec.metadata.domain || 'default') !== query.domain) continue;
      out.push(agentRecordToJson(rec, now) as AgentInfo);
    }
    return out;
  }

  /** The registered agents (AgentIndex has no listing; every registered agent has a token here). */
  private ids(): string[] {
    return [...this.tokens.keys()];
  }
}
