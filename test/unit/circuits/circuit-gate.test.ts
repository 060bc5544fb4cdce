import { describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { CircuitCache, type CircuitBreakers, type ClaimResult, type OpenCircuit } from '@reach/circuits';
import { PREFERRED_AGENT, type RouteHints } from '@reach/routing';
import { routeWithCircuits } from '../../../services/router/src/circuit-gate.js';
import { agent, deps, envelope, indexOf, NOW } from '../routing/fixtures.js';

const hints: RouteHints = { attempt: 0, excludeAgents: [], preferredAgent: undefined, rejectOnSaturation: false, capabilityTags: [] };

/** Breakers whose Redis answers are scripted: the open set and the probe claims. */
function fakeBreakers(open: OpenCircuit[], claim: ClaimResult = 'CLAIMED') {
  const calls = { claims: [] as string[], releases: [] as string[], snapshots: 0 };
  const breakers = {
    openCircuits: () => {
      calls.snapshots++;
      return Promise.resolve(open);
    },
    claimProbe: (id: string) => {
      calls.claims.push(id);
      return Promise.resolve(claim);
    },
    releaseProbe: (id: string) => {
      calls.releases.push(id);
      return Promise.resolve(true);
    },
  } as unknown as CircuitBreakers;
  return { breakers, calls };
}

async function cacheOf(open: OpenCircuit[], claim?: ClaimResult) {
  const { breakers, calls } = fakeBreakers(open, claim);
  const cache = new CircuitCache({ breakers, instanceId: 'router-1', logger: silentLogger });
  await cache.refresh(NOW);
  return { cache, calls };
}

const circuit = (agentId: string, state: 'OPEN' | 'HALF_OPEN', openUntil = NOW + 60_000): OpenCircuit => ({
  agentId,
  state,
  reason: 'failure_rate',
  openUntil,
  probeBy: null,
  probeUntil: null,
});

// The healthier agent `a` wins every plain decision.
const a = agent('a', { currentLoad: 0 });
const b = agent('b', { currentLoad: 5, health: 0.5 });

describe('routing through the circuit map (R-B2, R-D8)', () => {
  it('routes as before and asks Redis nothing while every circuit is closed', async () => {
    const { cache, calls } = await cacheOf([]);
    const { decision, probes } = await routeWithCircuits(envelope(), hints, deps(indexOf(a, b)), cache, NOW);
    expect(decision).toMatchObject({ kind: 'routed', agentId: 'a' });
    expect(probes).toEqual([]);
    expect(calls.claims).toEqual([]);
  });

  it('never chooses an agent whose circuit is OPEN', async () => {
    const { cache, calls } = await cacheOf([circuit('a', 'OPEN')]);
    const { decision } = await routeWithCircuits(envelope(), hints, deps(indexOf(a, b)), cache, NOW);
    expect(decision).toMatchObject({ kind: 'routed', agentId: 'b', trace: { rejected: { circuit: 1 } } });
    expect(calls.claims).toEqual([]);
  });

  it('no route with the circuit rejection counted when the only candidate is open', async () => {
    const { cache } = await cacheOf([circuit('a', 'OPEN')]);
    const { decision } = await routeWithCircuits(envelope(), hints, deps(indexOf(a)), cache, NOW);
    expect(decision).toMatchObject({ kind: 'no_route', trace: { rejected: { circuit: 1 } } });
  });

  it('reads an OPEN circuit past its open_until as HALF_OPEN and sends it the claimed probe, even over a better candidate', async () => {
    const { cache, calls } = await cacheOf([circuit('b', 'OPEN', NOW - 1)]);
    expect(cache.verdict('b', NOW)).toBe('half_open');
    const { decision, probes } = await routeWithCircuits(envelope(), hints, deps(indexOf(a, b)), cache, NOW);
    expect(decision).toMatchObject({ kind: 'routed', agentId: 'b', trace: { strategy: 'circuit_probe' } });
    expect(probes).toEqual(['b']);
    expect(calls.claims).toEqual(['b']);
    expect(calls.releases).toEqual([]);
  });

  it('keeps a half-open agent out when another instance holds its probe', async () => {
    const { cache } = await cacheOf([circuit('b', 'HALF_OPEN')], 'BUSY');
    const { decision, probes } = await routeWithCircuits(envelope(), hints, deps(indexOf(a, b)), cache, NOW);
    expect(decision).toMatchObject({ kind: 'routed', agentId: 'a' });
    expect(probes).toEqual([]);
    const only = await routeWithCircuits(envelope(), hints, deps(indexOf(b)), cache, NOW);
    expect(only.decision).toMatchObject({ kind: 'no_route', trace: { rejected: { circuit: 1 } } });
  });

  it("gives the probe back when the sender's preferred agent takes the message", async () => {
    const { cache, calls } = await cacheOf([circuit('b', 'HALF_OPEN')]);
    const env = envelope({ headers: { [PREFERRED_AGENT]: 'a' } });
    const { decision, probes } = await routeWithCircuits(env, { ...hints, preferredAgent: 'a' }, deps(indexOf(a, b)), cache, NOW);
    expect(decision).toMatchObject({ kind: 'routed', agentId: 'a', trace: { strategy: 'preferred' } });
    expect(probes).toEqual([]);
    expect(calls.releases).toEqual(['b']);
  });

  it('routes normally to an agent Redis reports CLOSED although the map was behind', async () => {
    const { cache } = await cacheOf([circuit('a', 'HALF_OPEN')], 'CLOSED');
    const { decision, probes } = await routeWithCircuits(envelope(), hints, deps(indexOf(a)), cache, NOW);
    expect(decision).toMatchObject({ kind: 'routed', agentId: 'a', trace: { strategy: 'weighted' } });
    expect(probes).toEqual([]);
    expect(cache.verdict('a', NOW)).toBe('closed');
  });

  it('keeps the last known circuits when a refresh fails (Redis down)', async () => {
    let fail = false;
    const breakers = {
      openCircuits: () => (fail ? Promise.reject(new Error('redis is reconnecting')) : Promise.resolve([circuit('a', 'OPEN')])),
    } as unknown as CircuitBreakers;
    const cache = new CircuitCache({ breakers, instanceId: 'router-1', logger: silentLogger });
    await cache.refresh(NOW);
    fail = true;
    await cache.refresh(NOW + 1);
    expect(cache.verdict('a', NOW + 1)).toBe('open');
  });
});

describe('circuit cache with a Redis that never answers', () => {
  it('routes without the probe instead of waiting for the claim', async () => {
    const breakers = {
      openCircuits: () => Promise.resolve([circuit('b', 'HALF_OPEN')]),
      claimProbe: () => new Promise<ClaimResult>(() => {}),
    } as unknown as CircuitBreakers;
    const cache = new CircuitCache({ breakers, instanceId: 'router-1', logger: silentLogger });
    await cache.refresh(NOW);
    const { decision, probes } = await routeWithCircuits(envelope(), hints, deps(indexOf(a, b)), cache, NOW);
    expect(decision).toMatchObject({ kind: 'routed', agentId: 'a' });
    expect(probes).toEqual([]);
  });
});
