import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { healthValue, loadRateOf, qosScore, statusForLoad, statusForQos } from '@reach/agents';

// R-A5: QoS from load rate, latency and health; below the threshold → COOLDOWN.
const idle = { current_load: 0, queue_length: 0, avg_latency_ms: 0, health: 1 };

describe('qosScore', () => {
  it('is 1 for an idle, instant, healthy agent', () => {
    expect(qosScore(idle, 10)).toBe(1);
  });

  it('follows the documented formula: health × (0.7·(1 − min(ρ,1)) + 0.3·5000/(5000 + latency))', () => {
    expect(qosScore({ ...idle, current_load: 5, avg_latency_ms: 5000 }, 10)).toBeCloseTo(0.7 * 0.5 + 0.3 * 0.5, 6);
    expect(qosScore({ ...idle, avg_latency_ms: 10_000 }, 10)).toBeCloseTo(0.8, 6);
    expect(qosScore({ ...idle, current_load: 10, avg_latency_ms: 10_000 }, 10)).toBeCloseTo(0.1, 6);
    expect(qosScore({ ...idle, health: 0.5 }, 10)).toBeCloseTo(0.5, 6);
  });

  it('uses the load as a rate of max_concurrency, never a count', () => {
    expect(qosScore({ ...idle, current_load: 5 }, 10)).toBe(qosScore({ ...idle, current_load: 50 }, 100));
  });

  it('treats load over capacity like full capacity', () => {
    expect(qosScore({ ...idle, current_load: 30 }, 10)).toBe(qosScore({ ...idle, current_load: 10 }, 10));
  });

  it('is 0 for an agent that reports health 0', () => {
    expect(qosScore({ ...idle, health: 0 }, 10)).toBe(0);
  });

  it('stays in [0, 1] and never rises with load, latency or falling health', () => {
    const report = fc.record({
      current_load: fc.integer({ min: 0, max: 1000 }),
      queue_length: fc.integer({ min: 0, max: 1000 }),
      avg_latency_ms: fc.double({ min: 0, max: 1e7, noNaN: true }),
      health: fc.double({ min: 0, max: 1, noNaN: true }),
    });
    fc.assert(
      fc.property(report, fc.integer({ min: 1, max: 500 }), fc.integer({ min: 1, max: 100 }), (r, mc, more) => {
        const q = qosScore(r, mc);
        expect(q).toBeGreaterThanOrEqual(0);
        expect(q).toBeLessThanOrEqual(1);
        expect(qosScore({ ...r, current_load: r.current_load + more }, mc)).toBeLessThanOrEqual(q);
        expect(qosScore({ ...r, avg_latency_ms: r.avg_latency_ms + more * 100 }, mc)).toBeLessThanOrEqual(q);
        expect(qosScore({ ...r, health: r.health / 2 }, mc)).toBeLessThanOrEqual(q);
      }),
    );
  });
});

describe('statusForLoad', () => {
  it('never puts an agent in COOLDOWN for being full: the routers hold its work instead', () => {
    // full, fast, 95 % healthy: QoS 0.28 with the load, under the 0.3 threshold
    const full = { current_load: 10, queue_length: 4, avg_latency_ms: 120, health: 0.95 };
    expect(qosScore(full, 10)).toBeLessThan(0.3);
    expect(statusForLoad(full, 10, 0.3)).toBe('ONLINE');
  });

  it('still puts an unhealthy agent in COOLDOWN, busy or idle', () => {
    const failing = { current_load: 0, queue_length: 0, avg_latency_ms: 20_000, health: 0.3 };
    expect(statusForLoad(failing, 4, 0.3)).toBe('COOLDOWN');
    expect(statusForLoad({ ...failing, current_load: 4 }, 4, 0.3)).toBe('COOLDOWN');
    expect(statusForLoad({ ...failing, health: 1 }, 4, 0.3)).toBe('ONLINE');
  });
});

describe('statusForQos', () => {
  it('is COOLDOWN strictly below the threshold, ONLINE at or above it', () => {
    expect(statusForQos(0.29, 0.3)).toBe('COOLDOWN');
    expect(statusForQos(0.3, 0.3)).toBe('ONLINE');
    expect(statusForQos(0.9, 0.3)).toBe('ONLINE');
    expect(statusForQos(0, 0)).toBe('ONLINE');
  });
});

describe('loadRateOf', () => {
  it('is current_load / max_concurrency, 0 for nonsense', () => {
    expect(loadRateOf(3, 4)).toBe(0.75);
    expect(loadRateOf(0, 4)).toBe(0);
    expect(loadRateOf(3, 0)).toBe(0);
    expect(loadRateOf(-1, 4)).toBe(0);
  });
});

describe('healthValue', () => {
  it('reads numbers in [0, 1] and common words', () => {
    expect(healthValue(0.7)).toBe(0.7);
    expect(healthValue('ok')).toBe(1);
    expect(healthValue('Degraded')).toBe(0.5);
    expect(healthValue('unhealthy')).toBe(0);
    expect(healthValue(true)).toBe(1);
  });
  it('refuses anything else', () => {
    expect(healthValue(1.5)).toBeUndefined();
    expect(healthValue(-0.1)).toBeUndefined();
    expect(healthValue(Number.NaN)).toBeUndefined();
    expect(healthValue('great')).toBeUndefined();
    expect(healthValue({})).toBeUndefined();
  });
});
