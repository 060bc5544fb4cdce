import type { AgentRecord, Capability } from '@reach/envelope';
import { capabilityMatches } from './capability-name.js';
import { loadRateOf } from './qos.js';

/**
 * Reading an AgentRecord the way every consumer of reach.agents.v1 must: load as a rate, lease
 * validity against the clock, newest revision wins. Routers, the dispatcher, the dead-letter
 * service and the CLI use these instead of re-deriving them.
 */

/** Heartbeats are due every TTL/2 (R-A4). */
export function heartbeatIntervalMs(ttlS: number): number {
  return Math.floor((ttlS * 1000) / 2);
}

/**
 * How long after its last heartbeat (or registration) an agent stays alive: REACH_MISSED_HEARTBEATS
 * consecutive heartbeats missed (R-A4). With the default of 2 this is exactly the TTL.
 * The lease expires, and the registry marks the agent OFFLINE, at that moment.
 */
export function leaseDurationMs(ttlS: number, missedHeartbeats: number): number {
  return missedHeartbeats * heartbeatIntervalMs(ttlS);
}

/** current_load / max_concurrency (R-B3: load is always a rate). */
export function loadRate(record: Pick<AgentRecord, 'load' | 'metadata'>): number {
  return loadRateOf(record.load.current_load, record.metadata.max_concurrency);
}

/** Free capacity in [0, 1]: 1 − load rate, the router's load term. */
export function freeCapacity(record: Pick<AgentRecord, 'load' | 'metadata'>): number {
  return Math.max(0, 1 - loadRate(record));
}

export function leaseValid(record: Pick<AgentRecord, 'lease_expires_at'>, nowMs: number = Date.now()): boolean {
  return record.lease_expires_at > nowMs;
}

/** May this agent be given new work? ONLINE (not COOLDOWN, not OFFLINE) with a valid lease (R-B2). */
export function acceptsNewWork(record: Pick<AgentRecord, 'status' | 'lease_expires_at'>, nowMs: number = Date.now()): boolean {
  return record.status === 'ONLINE' && leaseValid(record, nowMs);
}

/** The agent's capabilities that satisfy a requested name (exact on the base; a pinned @major must match). */
export function matchingCapabilities(record: Pick<AgentRecord, 'capabilities'>, requested: string): Capability[] {
  return record.capabilities.filter((c) => capabilityMatches(requested, c));
}

export function offersCapability(record: Pick<AgentRecord, 'capabilities'>, requested: string): boolean {
  return record.capabilities.some((c) => capabilityMatches(requested, c));
}

/** For table views of reach.agents.v1: only a newer revision replaces what is held. */
export function isNewerRecord(incoming: Pick<AgentRecord, 'revision'>, current: Pick<AgentRecord, 'revision'> | undefined): boolean {
  return current === undefined || incoming.revision > current.revision;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function parseOpaque(json: string | null): unknown {
  if (json === null) return null;
  try {
    return JSON.parse(json) as unknown;
  } catch {
    return json;
  }
}

/**
 * The JSON form of an agent for the public API (docs/design.md §3, R-A1): snake_case Avro names,
 * timestamps as RFC 3339, scope/constraints as JSON, plus derived fields a reader needs
 * (load_rate, lease_valid, heartbeat_interval_ms).
 */
export function agentRecordToJson(record: AgentRecord, nowMs: number = Date.now()): Record<string, unknown> {
  return {
    agent_id: record.agent_id,
    agent_type: record.agent_type,
    status: record.status,
    revision: record.revision,
    lease_id: record.lease_id,
    lease_expires_at: iso(record.lease_expires_at),
    lease_valid: leaseValid(record, nowMs),
    ttl_s: record.ttl_s,
    heartbeat_interval_ms: heartbeatIntervalMs(record.ttl_s),
    endpoints: record.endpoints,
    capabilities: record.capabilities.map((c) => ({
      name: c.name,
      version: c.version,
      mode: c.mode,
      tags: c.tags,
      consumption: c.consumption,
      scope: parseOpaque(c.scope_json),
      constraints: parseOpaque(c.constraints_json),
    })),
    metadata: record.metadata,
    load: { ...record.load, load_rate: loadRate(record) },
    qos: record.qos,
    registered_at: iso(record.registered_at),
    updated_at: iso(record.updated_at),
  };
}
