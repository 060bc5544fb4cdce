import { describe, expect, it } from 'vitest';
import type { AgentRecord } from '@reach/envelope';
import {
  acceptsNewWork,
  agentRecordToJson,
  freeCapacity,
  heartbeatIntervalMs,
  isNewerRecord,
  leaseDurationMs,
  leaseValid,
  loadRate,
  matchingCapabilities,
  offersCapability,
} from '@reach/agents';

const NOW = Date.UTC(2025, 0, 2, 3, 4, 5);

function record(overrides: Partial<AgentRecord> = {}): AgentRecord {
  return {
    agent_id: 'a.1',
    agent_type: 'a',
    status: 'ONLINE',
    revision: 3,
    lease_id: 'lease_1',
    lease_expires_at: NOW + 10_000,
    ttl_s: 20,
    endpoints: { ws: null, http: null, protocol_version: '1' },
    capabilities: [
      { name: 'parse_pdf', version: null, mode: 'handle', tags: [], consumption: 'single', scope_json: '{"access":"read"}', constraints_json: null },
      { name: 'summarize', version: '2.0', mode: 'handle', tags: ['x'], consumption: 'single', scope_json: null, constraints_json: null },
    ],
    metadata: { max_concurrency: 4, region: null, timezone: null, model: null, domain: 'default', weight: 1, extra: {} },
    load: { current_load: 3, queue_length: 0, avg_latency_ms: 12, health: 1 },
    qos: 0.5,
    registered_at: NOW - 1000,
    updated_at: NOW,
    ...overrides,
  };
}

describe('AgentRecord helpers', () => {
  it('heartbeats are due every TTL/2; the lease lasts missed × interval', () => {
    expect(heartbeatIntervalMs(60)).toBe(30_000);
    expect(heartbeatIntervalMs(2)).toBe(1000);
    expect(leaseDurationMs(60, 2)).toBe(60_000);
    expect(leaseDurationMs(60, 3)).toBe(90_000);
  });

  it('load is a rate of max_concurrency', () => {
    expect(loadRate(record())).toBe(0.75);
    expect(freeCapacity(record())).toBe(0.25);
    expect(freeCapacity(record({ load: { current_load: 9, queue_length: 0, avg_latency_ms: 0, health: 1 } }))).toBe(0);
  });

  it('a lease is valid until lease_expires_at', () => {
    expect(leaseValid(record(), NOW)).toBe(true);
    expect(leaseValid(record(), NOW + 10_000)).toBe(false);
  });

  it('only ONLINE agents with a valid lease take new work', () => {
    expect(acceptsNewWork(record(), NOW)).toBe(true);
    expect(acceptsNewWork(record({ status: 'COOLDOWN' }), NOW)).toBe(false);
    expect(acceptsNewWork(record({ status: 'OFFLINE' }), NOW)).toBe(false);
    expect(acceptsNewWork(record(), NOW + 20_000)).toBe(false);
  });

  it('matches capabilities exactly, with pinned majors', () => {
    expect(offersCapability(record(), 'parse_pdf')).toBe(true);
    expect(offersCapability(record(), 'parse_pdfs')).toBe(false);
    expect(offersCapability(record(), 'summarize@2')).toBe(true);
    expect(offersCapability(record(), 'summarize@1')).toBe(false);
    expect(matchingCapabilities(record(), 'summarize').map((c) => c.tags)).toEqual([['x']]);
  });

  it('newer revisions win', () => {
    expect(isNewerRecord({ revision: 4 }, { revision: 3 })).toBe(true);
    expect(isNewerRecord({ revision: 3 }, { revision: 3 })).toBe(false);
    expect(isNewerRecord({ revision: 1 }, undefined)).toBe(true);
  });

  it('renders the public JSON form: RFC 3339 times, scope as JSON, derived load rate', () => {
    const json = agentRecordToJson(record(), NOW);
    expect(json).toMatchObject({
      agent_id: 'a.1',
      status: 'ONLINE',
      lease_expires_at: '2025-01-02T03:04:15.000Z',
      lease_valid: true,
      registered_at: '2025-01-02T03:04:04.000Z',
      updated_at: '2025-01-02T03:04:05.000Z',
      heartbeat_interval_ms: 10_000,
      qos: 0.5,
      load: { current_load: 3, queue_length: 0, avg_latency_ms: 12, health: 1, load_rate: 0.75 },
    });
    expect((json.capabilities as Array<Record<string, unknown>>)[0]).toEqual({
      name: 'parse_pdf',
      version: null,
      mode: 'handle',
      tags: [],
      consumption: 'single',
      scope: { access: 'read' },
      constraints: null,
    });
  });
});
