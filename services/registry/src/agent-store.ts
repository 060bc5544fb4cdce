import { ReachError } from '@reach/core';
import type { AgentLoad, AgentRecord, AgentStatus, Capability } from '@reach/envelope';
import type { AgentDescriptor } from '@reach/agents';
import { capabilityIndexNames } from '@reach/agents';
import type { Redis } from '@reach/store';
import { DEREGISTER_SCRIPT, EXPIRE_SCRIPT, HEARTBEAT_SCRIPT, PURGE_SCRIPT, REGISTER_SCRIPT } from './redis-scripts.js';

/**
 * The registry's state in Redis (layout in redis-scripts.ts). Every write is one atomic
 * script; reads assemble AgentRecords from the agent hashes.
 */
export const KEY_PREFIX = 'reach:';
export const keys = {
  agent: (id: string) => `${KEY_PREFIX}agent:${id}`,
  revision: (id: string) => `${KEY_PREFIX}agent-rev:${id}`,
  lease: (id: string) => `${KEY_PREFIX}lease:${id}`,
  capability: (name: string) => `${KEY_PREFIX}cap:${name}`,
  agents: `${KEY_PREFIX}agents`,
  leases: `${KEY_PREFIX}leases`,
  offline: `${KEY_PREFIX}offline`,
};

/** A deregistered or purged agent's revision counter is kept this long (s), so a comeback keeps counting up. */
const REVISION_KEEP_S = 7 * 24 * 3600;

interface ScriptCommands {
  reachRegister(...args: Array<string | number>): Promise<[number, number]>;
  reachHeartbeat(...args: Array<string | number>): Promise<[number, string] | null>;
  reachDeregister(...args: Array<string | number>): Promise<number>;
  reachExpire(...args: Array<string | number>): Promise<string[]>;
  reachPurge(...args: Array<string | number>): Promise<string[]>;
}

/** Redis failures become 5002 DEPENDENCY_UNAVAILABLE (retryable); our own errors pass through. */
async function dependency<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ReachError) throw err;
    throw new ReachError('DEPENDENCY_UNAVAILABLE', `redis: ${what} failed: ${(err as Error).message}`, { cause: err });
  }
}

function avroCapability(c: AgentDescriptor['capabilities'][number]): Capability {
  return {
    name: c.name,
    version: c.version,
    mode: c.mode,
    tags: c.tags,
    consumption: c.consumption,
    scope_json: c.scope === null || c.scope === undefined ? null : JSON.stringify(c.scope),
    constraints_json: c.constraints === null || c.constraints === undefined ? null : JSON.stringify(c.constraints),
  };
}

function recordFromHash(h: Record<string, string>): AgentRecord | undefined {
  if (!h.agent_id || !h.lease_id) return undefined;
  return {
    agent_id: h.agent_id,
    agent_type: h.agent_type ?? '',
    status: (h.status ?? 'OFFLINE') as AgentStatus,
    revision: Number(h.revision ?? 0),
    lease_id: h.lease_id,
    lease_expires_at: Number(h.lease_expires_at ?? 0),
    ttl_s: Number(h.ttl_s ?? 0),
    endpoints: JSON.parse(h.endpoints ?? '{"ws":null,"http":null,"protocol_version":"1"}') as AgentRecord['endpoints'],
    capabilities: JSON.parse(h.capabilities ?? '[]') as Capability[],
    metadata: JSON.parse(h.metadata ?? '{}') as AgentRecord['metadata'],
    load: JSON.parse(h.load ?? '{"current_load":0,"queue_length":0,"avg_latency_ms":0,"health":1}') as AgentLoad,
    qos: Number(h.qos ?? 1),
    registered_at: Number(h.registered_at ?? 0),
    updated_at: Number(h.updated_at ?? 0),
  };
}

export interface RegisterInput {
  descriptor: AgentDescriptor;
  leaseId: string;
  nowMs: number;
  leaseMs: number;
  status: Exclude<AgentStatus, 'OFFLINE'>;
  load: AgentLoad;
  qos: number;
  /** Refuse when the id is already registered (a caller not entitled to replace it). */
  mustNotExist: boolean;
}

export interface HeartbeatInput {
  agentId: string;
  /** The lease id the caller's QoS was computed against. */
  leaseId: string;
  nowMs: number;
  leaseMs: number;
  status: Exclude<AgentStatus, 'OFFLINE'>;
  load: AgentLoad;
  qos: number;
}

export class AgentStore {
  private readonly cmd: ScriptCommands;

  constructor(private readonly redis: Redis) {
    redis.defineCommand('reachRegister', { numberOfKeys: 6, lua: REGISTER_SCRIPT });
    redis.defineCommand('reachHeartbeat', { numberOfKeys: 5, lua: HEARTBEAT_SCRIPT });
    redis.defineCommand('reachDeregister', { numberOfKeys: 6, lua: DEREGISTER_SCRIPT });
    redis.defineCommand('reachExpire', { numberOfKeys: 2, lua: EXPIRE_SCRIPT });
    redis.defineCommand('reachPurge', { numberOfKeys: 3, lua: PURGE_SCRIPT });
    this.cmd = redis as unknown as ScriptCommands;
  }

  /** Atomically replaces the record and its capability index (R-A3). 'exists' when refused by mustNotExist. */
  async register(input: RegisterInput): Promise<{ revision: number; replaced: boolean } | 'exists'> {
    const d = input.descriptor;
    const index = [...new Set(d.capabilities.flatMap((c) => capabilityIndexNames(c)))];
    const fields: Record<string, string> = {
      agent_id: d.agent_id,
      agent_type: d.agent_type,
      status: input.status,
      lease_id: input.leaseId,
      lease_expires_at: String(input.nowMs + input.leaseMs),
      ttl_s: String(d.ttl_s),
      endpoints: JSON.stringify(d.endpoints),
      capabilities: JSON.stringify(d.capabilities.map(avroCapability)),
      metadata: JSON.stringify(d.metadata),
      load: JSON.stringify(input.load),
      qos: String(input.qos),
      registered_at: String(input.nowMs),
      updated_at: String(input.nowMs),
    };
    const id = d.agent_id;
    try {
      const [revision, existed] = await dependency('register', () =>
        this.cmd.reachRegister(
          keys.agent(id),
          keys.agents,
          keys.leases,
          keys.revision(id),
          keys.lease(id),
          keys.offline,
          id,
          input.mustNotExist ? '1' : '0',
          JSON.stringify(index),
          input.nowMs + input.leaseMs,
          input.leaseMs,
          input.leaseId,
          KEY_PREFIX,
          ...Object.entries(fields).flat(),
        ),
      );
      return { revision: Number(revision), replaced: Number(existed) === 1 };
    } catch (err) {
      if (err instanceof ReachError && /REACH_EXISTS/.test(err.message)) return 'exists';
      throw err;
    }
  }

  /** Renews the lease with a heartbeat's load. undefined: unknown agent; 'stale': re-registered meanwhile. */
  async heartbeat(input: HeartbeatInput): Promise<{ revision: number; previous: AgentStatus } | undefined | 'stale'> {
    const id = input.agentId;
    try {
      const out = await dependency('heartbeat', () =>
        this.cmd.reachHeartbeat(
          keys.agent(id),
          keys.leases,
          keys.revision(id),
          keys.lease(id),
          keys.offline,
          id,
          input.leaseId,
          input.nowMs + input.leaseMs,
          input.leaseMs,
          input.status,
          JSON.stringify(input.load),
          String(input.qos),
          input.nowMs,
        ),
      );
      if (!out) return undefined;
      return { revision: Number(out[0]), previous: out[1] as AgentStatus };
    } catch (err) {
      if (err instanceof ReachError && /REACH_STALE/.test(err.message)) return 'stale';
      throw err;
    }
  }

  /** Removes the agent and its index entries at once. False when it was not registered. */
  async deregister(id: string): Promise<boolean> {
    const n = await dependency('deregister', () =>
      this.cmd.reachDeregister(keys.agent(id), keys.agents, keys.leases, keys.revision(id), keys.lease(id), keys.offline, id, KEY_PREFIX, REVISION_KEEP_S),
    );
    return Number(n) === 1;
  }

  /** Claims agents whose lease ran out by `nowMs` and marks them OFFLINE. Returns their ids. */
  expireDue(nowMs: number, limit: number, purgeAtMs: number): Promise<string[]> {
    return dependency('expire', () => this.cmd.reachExpire(keys.leases, keys.offline, nowMs, limit, purgeAtMs, KEY_PREFIX));
  }

  /** Removes agents that stayed OFFLINE until `nowMs`. Returns their ids (each needs a tombstone). */
  purgeDue(nowMs: number, limit: number): Promise<string[]> {
    return dependency('purge', () => this.cmd.reachPurge(keys.offline, keys.agents, keys.leases, nowMs, limit, KEY_PREFIX, REVISION_KEEP_S));
  }

  async get(id: string): Promise<AgentRecord | undefined> {
    const h = await dependency('read', () => this.redis.hgetall(keys.agent(id)));
    return recordFromHash(h);
  }

  /** Records of many agents in one round trip; missing ones are undefined. */
  async getMany(ids: readonly string[]): Promise<Array<AgentRecord | undefined>> {
    if (ids.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hgetall(keys.agent(id));
    const results = await dependency('read', async () => (await pipeline.exec()) ?? []);
    return results.map(([err, h]) => {
      if (err) throw new ReachError('DEPENDENCY_UNAVAILABLE', `redis: read failed: ${err.message}`, { cause: err });
      return recordFromHash(h as Record<string, string>);
    });
  }

  /** Ids of the agents indexed under a capability name (exact: base, or base@major). */
  capabilityMembers(name: string): Promise<string[]> {
    return dependency('read', () => this.redis.smembers(keys.capability(name)));
  }

  allAgentIds(): Promise<string[]> {
    return dependency('read', () => this.redis.smembers(keys.agents));
  }

  /** Statuses of every agent, for the agents-by-status gauge. */
  async statuses(): Promise<string[]> {
    const ids = await this.allAgentIds();
    if (ids.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hget(keys.agent(id), 'status');
    const results = (await pipeline.exec()) ?? [];
    return results.map(([, s]) => s).filter((s): s is string => typeof s === 'string');
  }
}
