import { describe, expect, it } from 'vitest';
import { capabilityStats, OTHER_CAPABILITIES } from '@reach/agents';
import { agent, cap } from '../routing/fixtures.js';

const withQos = (a: ReturnType<typeof agent>, qos: number) => ({ ...a, qos });

describe('capabilityStats: fleet load and QoS by capability, bounded (R-F2)', () => {
  it('averages load rate and QoS over ONLINE agents and counts every status', () => {
    const rows = capabilityStats(
      [
        withQos(agent('a', { caps: [cap('parse')], currentLoad: 2, maxConcurrency: 10 }), 0.9),
        withQos(agent('b', { caps: [cap('parse'), cap('parse', { version: '2' })], currentLoad: 6, maxConcurrency: 10 }), 0.5),
        withQos(agent('c', { caps: [cap('parse')], status: 'COOLDOWN', currentLoad: 10 }), 0.1),
      ],
      10,
    );
    expect(rows).toHaveLength(1);
    const [parse] = rows;
    expect(parse).toMatchObject({ capability: 'parse', agents: { ONLINE: 2, COOLDOWN: 1 }, minQos: 0.5 });
    expect(parse!.meanLoadRate).toBeCloseTo(0.4);
    expect(parse!.meanQos).toBeCloseTo(0.7);
  });

  it('keeps the busiest N capabilities and folds the rest into one row', () => {
    const agents = ['x', 'x', 'x', 'y', 'y', 'z', 'w'].map((c, i) => agent(`a${i}`, { caps: [cap(c)] }));
    const rows = capabilityStats(agents, 2);
    expect(rows.map((r) => r.capability)).toEqual(['x', 'y', OTHER_CAPABILITIES]);
    expect(rows[2]!.agents).toEqual({ ONLINE: 2 });
  });

  it('ranks live capabilities first: a capability with one ONLINE agent beats one with many OFFLINE', () => {
    const stale = ['old', 'old', 'old'].map((c, i) => agent(`s${i}`, { caps: [cap(c)], status: 'OFFLINE' }));
    const rows = capabilityStats([...stale, agent('live', { caps: [cap('zz_live')] })], 1);
    expect(rows.map((r) => r.capability)).toEqual(['zz_live', OTHER_CAPABILITIES]);
  });

  it('reports neutral values for a capability with no ONLINE agent', () => {
    const [row] = capabilityStats([agent('a', { status: 'OFFLINE' })], 5);
    expect(row).toMatchObject({ agents: { OFFLINE: 1 }, meanLoadRate: 0, minQos: 1, meanQos: 1 });
  });
});
