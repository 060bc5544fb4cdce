import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { silentLogger } from '@reach/core';
import { createRedis, type Redis } from '@reach/store';
import {
  CircuitBreakers,
  CircuitCache,
  claimProbe,
  CLOSED_RECORD,
  countersKey,
  DEFAULT_POLICY,
  effectiveState,
  OPEN_SET_KEY,
  recordOutcome,
  type CircuitPolicy,
  type CircuitRecord,
  type Counters,
} from '@reach/circuits';
import { stack, uniq } from '../../helpers/env.js';

// The shared breaker in the real Redis: two independent clients (as two dispatcher or router
// instances would hold) agree, the Lua script is atomic under concurrent outcomes, and it
// implements exactly the rules of the pure state machine.
let redisA: Redis;
let redisB: Redis;
const used: string[] = [];

const T0 = 1_800_000_000_000;
const policy: CircuitPolicy = { ...DEFAULT_POLICY, ejectMinVolume: 20, ejectProbes: 2 };

beforeAll(() => {
  redisA = createRedis(stack.redisUrl, silentLogger, { connectionName: 'reach-circuits-test-a' });
  redisB = createRedis(stack.redisUrl, silentLogger, { connectionName: 'reach-circuits-test-b' });
});

afterAll(async () => {
  const b = new CircuitBreakers(redisA, policy);
  await Promise.all(used.map((id) => b.reset(id)));
  redisA?.disconnect();
  redisB?.disconnect();
});

function agent(): string {
  const id = uniq('it.circuit');
  used.push(id);
  return id;
}

describe('circuit breakers in Redis', () => {
  it('two independent instances see one circuit: failures recorded by both open it for both', async () => {
    const a = new CircuitBreakers(redisA, policy);
    const b = new CircuitBreakers(redisB, policy);
    const id = agent();
    for (let i = 0; i < 5; i++) {
      await a.recordOutcome(id, false, T0 + i);
      await b.recordOutcome(id, i === 0, T0 + i);
    }
    // 10 outcomes, 9 failures: the 10th (on b) opened it.
    const sa = await a.state(id, T0 + 10);
    const sb = await b.state(id, T0 + 10);
    expect(sa).toEqual(sb);
    expect(sa).toMatchObject({ effective: 'OPEN', reason: 'failure_rate', openUntil: T0 + 4 + policy.openMs });
    expect((await a.openCircuits(T0 + 10)).find((c) => c.agentId === id)).toMatchObject({ state: 'OPEN' });
    expect((await b.openCircuits(T0 + 4 + policy.openMs)).find((c) => c.agentId === id)).toMatchObject({ state: 'HALF_OPEN' });
  });

  it('is atomic under concurrent outcomes: one opening transition, every outcome before it counted', async () => {
    const a = new CircuitBreakers(redisA, { ...policy, minVolume: 50, ejectMinVolume: 1000 });
    const b = new CircuitBreakers(redisB, { ...policy, minVolume: 50, ejectMinVolume: 1000 });
    const id = agent();
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => (i % 2 ? a : b).recordOutcome(id, false, T0 + 5)));
    const openings = results.filter((r) => r.transition?.to === 'OPEN');
    expect(openings).toHaveLength(1);
    expect(openings[0]!.transition).toEqual({ from: 'CLOSED', to: 'OPEN', reason: 'failure_rate' });
    // Exactly the first 50 were counted (the 50th opened it); the rest hit an OPEN circuit.
    expect(results.filter((r) => r.state === 'CLOSED')).toHaveLength(49);
    const counters = await redisA.hgetall(countersKey(id));
    expect(
      Object.entries(counters)
        .filter(([k]) => k.startsWith('s:'))
        .reduce((n, [, v]) => n + Number(v), 0),
    ).toBe(50);
  });

  it('counts a batch of outcomes like as many single ones, in Redis and in the pure state machine (gathered acks)', async () => {
    const b = new CircuitBreakers(redisA, policy);
    const id = agent();
    // 9 acks at once, then 10 failures one by one: 10/19 failed > 50 % → OPEN at the 10th
    // failure, exactly as 9 single acks would have made it.
    expect((await b.recordOutcome(id, true, T0, 9)).state).toBe('CLOSED');
    let pure = recordOutcome(CLOSED_RECORD, new Map(), true, T0, policy, 9);
    const states: string[] = [];
    for (let i = 0; i < 10; i++) {
      const real = await b.recordOutcome(id, false, T0 + 1 + i);
      pure = recordOutcome(pure.record, pure.counters, false, T0 + 1 + i, policy);
      expect(real.transition, `failure ${i + 1}`).toEqual(pure.transition);
      states.push(real.state);
    }
    expect(states.lastIndexOf('CLOSED')).toBe(8);
    expect(states[9]).toBe('OPEN');
    // Half-open, a batch of acks is one probe: an ejected circuit needing 2 probes stays half-open.
    const ejected = { ...pure.record, reason: 'eject' as const };
    const after = recordOutcome(ejected, pure.counters, true, T0 + policy.openMs + 20, policy, 5);
    expect(after.record).toMatchObject({ state: 'HALF_OPEN', probeOk: 1 });
  });

  it('grants the half-open probe to exactly one of many concurrent claimers', async () => {
    const a = new CircuitBreakers(redisA, policy);
    const b = new CircuitBreakers(redisB, policy);
    const id = agent();
    for (let i = 0; i < 10; i++) await a.recordOutcome(id, false, T0);
    const half = T0 + policy.openMs;
    const claims = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).claimProbe(id, `router-${i}`, half)));
    expect(claims.filter((c) => c === 'CLAIMED')).toHaveLength(1);
    expect(claims.filter((c) => c === 'BUSY')).toHaveLength(19);
    const holder = `router-${claims.indexOf('CLAIMED')}`;
    expect(await b.state(id, half)).toMatchObject({ state: 'HALF_OPEN', probeBy: holder });
    // Given back, another instance may take it; its success closes the circuit for everyone.
    expect(await a.releaseProbe(id, holder)).toBe(true);
    expect(await b.claimProbe(id, 'router-other', half + 1)).toBe('CLAIMED');
    const closed = await b.recordOutcome(id, true, half + 2);
    expect(closed).toEqual({ state: 'CLOSED', transition: { from: 'HALF_OPEN', to: 'CLOSED', reason: null } });
    expect(await a.state(id, half + 3)).toMatchObject({ effective: 'CLOSED', state: 'CLOSED' });
    expect(await redisA.zscore(OPEN_SET_KEY, id)).toBeNull();
    expect(await a.claimProbe(id, 'router-x', half + 3)).toBe('CLOSED');
  });

  it('the Lua script follows the pure state machine on random outcome sequences (conformance)', async () => {
    const b = new CircuitBreakers(redisA, policy);
    const step = fc.record({ ok: fc.boolean(), dt: fc.oneof(fc.integer({ min: 0, max: 3000 }), fc.integer({ min: 0, max: 130_000 })), claim: fc.boolean() });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 60 }), async (steps) => {
        const id = agent();
        let rec: CircuitRecord = CLOSED_RECORD;
        let counters: Counters = new Map();
        let now = T0;
        for (const s of steps) {
          now += s.dt;
          if (s.claim) {
            const pure = claimProbe(rec, now, 'router-a', policy);
            rec = pure.record;
            expect(await b.claimProbe(id, 'router-a', now)).toBe(pure.result);
          }
          const pure = recordOutcome(rec, counters, s.ok, now, policy);
          rec = pure.record;
          counters = pure.counters;
          const real = await b.recordOutcome(id, s.ok, now);
          expect(real.state).toBe(effectiveState(rec, now));
          expect(real.transition?.to ?? null).toBe(pure.transition?.to ?? null);
          const stored = await b.state(id, now);
          expect({ effective: stored.effective, reason: stored.reason, openUntil: stored.openUntil, probeOk: stored.probeOk }).toEqual({
            effective: effectiveState(rec, now),
            reason: rec.reason,
            openUntil: rec.openUntil,
            probeOk: rec.probeOk,
          });
        }
      }),
      { numRuns: 40 },
    );
  });

  it("a router's local cache follows Redis within a refresh and counts transitions", async () => {
    const writer = new CircuitBreakers(redisA, { ...policy, openMs: 60_000 });
    const transitions: string[] = [];
    let counts = { OPEN: 0, HALF_OPEN: 0 };
    const cache = new CircuitCache({
      breakers: new CircuitBreakers(redisB, policy),
      instanceId: 'router-cache-test',
      logger: silentLogger,
      onTransition: (s) => transitions.push(s),
      onSnapshot: (c) => (counts = { ...c }),
    });
    const id = agent();
    const now = Date.now();
    await cache.refresh(now);
    expect(cache.verdict(id, now)).toBe('closed');
    for (let i = 0; i < 10; i++) await writer.recordOutcome(id, false, now);
    await cache.refresh(now + 1);
    expect(cache.verdict(id, now + 1)).toBe('open');
    expect(cache.verdict(id, now + 60_000)).toBe('half_open');
    expect(counts.OPEN).toBeGreaterThanOrEqual(1);
    expect(transitions).toContain('OPEN');
    expect(await cache.claimProbe(id, now + 60_000)).toBe('CLAIMED');
    await writer.recordOutcome(id, true, now + 60_001);
    await cache.refresh(now + 60_002);
    expect(cache.verdict(id, now + 60_002)).toBe('closed');
    expect(transitions).toContain('CLOSED');
  });
});
