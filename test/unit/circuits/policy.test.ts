import { describe, expect, it } from 'vitest';
import {
  bucketSizes,
  claimProbe,
  CLOSED_RECORD,
  DEFAULT_POLICY,
  effectiveState,
  prune,
  recordOutcome,
  releaseProbe,
  windowTotals,
  type CircuitPolicy,
  type CircuitRecord,
  type Counters,
} from '@reach/circuits';

const T0 = 1_800_000_000_000;

/** Replays outcomes through the pure machine with an injected clock. */
class Machine {
  rec: CircuitRecord = CLOSED_RECORD;
  counters: Counters = new Map();
  transitions: string[] = [];
  constructor(readonly p: CircuitPolicy = DEFAULT_POLICY) {}
  record(ok: boolean, now: number): this {
    const r = recordOutcome(this.rec, this.counters, ok, now, this.p);
    this.rec = r.record;
    this.counters = r.counters;
    if (r.transition) this.transitions.push(`${r.transition.from}->${r.transition.to}${r.transition.reason ? `:${r.transition.reason}` : ''}`);
    return this;
  }
  many(n: number, ok: boolean, now: number): this {
    for (let i = 0; i < n; i++) this.record(ok, now);
    return this;
  }
  state(now: number) {
    return effectiveState(this.rec, now);
  }
}

describe('circuit policy: opening (R-D8)', () => {
  it('opens when the failure rate is above 50 % over the window with the minimum volume', () => {
    const m = new Machine().many(4, true, T0).many(5, false, T0 + 1000);
    expect(m.state(T0 + 1000)).toBe('CLOSED'); // 9 outcomes: below the volume of 10
    m.record(false, T0 + 2000); // 6 of 10 failed
    expect(m.state(T0 + 2000)).toBe('OPEN');
    expect(m.transitions).toEqual(['CLOSED->OPEN:failure_rate']);
    expect(m.rec).toMatchObject({ reason: 'failure_rate', openedAt: T0 + 2000, openUntil: T0 + 2000 + 120_000 });
  });

  it('exactly 50 % does not open ("above" the rate)', () => {
    const m = new Machine().many(5, true, T0).many(5, false, T0);
    expect(m.state(T0)).toBe('CLOSED');
  });

  it('never opens below the minimum volume, however bad', () => {
    const m = new Machine({ ...DEFAULT_POLICY, minVolume: 10 }).many(9, false, T0);
    expect(m.state(T0)).toBe('CLOSED');
  });

  it('forgets outcomes that left the rolling window (per-second buckets)', () => {
    expect(bucketSizes(DEFAULT_POLICY)).toEqual({ short: 1000, long: 10_000 });
    // 8 failures at T0, then 60 s later the window no longer holds them.
    const m = new Machine().many(8, false, T0);
    m.many(2, false, T0 + 60_000).many(1, true, T0 + 60_000);
    expect(m.state(T0 + 60_000)).toBe('CLOSED');
    const short = windowTotals(m.counters, 's', 60_000, 1000, T0 + 60_000);
    expect(short).toEqual({ ok: 1, fail: 2 });
    // ...while 59 s later they still count.
    const n = new Machine().many(8, false, T0).many(2, false, T0 + 59_000);
    expect(n.state(T0 + 59_000)).toBe('OPEN');
  });

  it('prunes buckets outside both windows', () => {
    const m = new Machine().many(3, true, T0);
    const later = prune(m.counters, DEFAULT_POLICY, T0 + 61_000);
    expect([...later.keys()].every((k) => k.startsWith('l:'))).toBe(true);
    expect(prune(m.counters, DEFAULT_POLICY, T0 + 301_000).size).toBe(0);
  });
});

describe('circuit policy: open, half-open, probe', () => {
  const opened = (): Machine => new Machine().many(10, false, T0);

  it('stays OPEN for the open period, ignoring late outcomes, then reads HALF_OPEN', () => {
    const m = opened();
    m.many(5, true, T0 + 1000);
    expect(m.state(T0 + 119_999)).toBe('OPEN');
    expect(m.state(T0 + 120_000)).toBe('HALF_OPEN');
    expect(m.transitions).toEqual(['CLOSED->OPEN:failure_rate']);
  });

  it("a probe's success closes the circuit and clears the windows", () => {
    const m = opened();
    m.record(true, T0 + 120_000);
    expect(m.state(T0 + 120_000)).toBe('CLOSED');
    expect(m.counters.size).toBe(0);
    expect(m.transitions).toEqual(['CLOSED->OPEN:failure_rate', 'HALF_OPEN->CLOSED']);
  });

  it("a probe's failure re-opens it for another open period", () => {
    const m = opened();
    m.record(false, T0 + 130_000);
    expect(m.state(T0 + 130_000)).toBe('OPEN');
    expect(m.rec.openUntil).toBe(T0 + 250_000);
    expect(m.transitions.at(-1)).toBe('HALF_OPEN->OPEN:failure_rate');
  });

  it('lets one probe at a time: the first claim wins, others are BUSY until it times out', () => {
    const m = opened();
    expect(claimProbe(m.rec, T0 + 1000, 'router-a', DEFAULT_POLICY).result).toBe('OPEN');
    const a = claimProbe(m.rec, T0 + 120_000, 'router-a', DEFAULT_POLICY);
    expect(a.result).toBe('CLAIMED');
    expect(a.record).toMatchObject({ state: 'HALF_OPEN', probeBy: 'router-a', probeUntil: T0 + 150_000 });
    expect(claimProbe(a.record, T0 + 121_000, 'router-b', DEFAULT_POLICY).result).toBe('BUSY');
    // One claim is one message: the holder cannot take a second probe either.
    expect(claimProbe(a.record, T0 + 121_000, 'router-a', DEFAULT_POLICY).result).toBe('BUSY');
    // The probe never reported: after the probe timeout another instance may send one.
    expect(claimProbe(a.record, T0 + 150_000, 'router-b', DEFAULT_POLICY).result).toBe('CLAIMED');
    // Given back (not sent): free at once.
    expect(claimProbe(releaseProbe(a.record, 'router-a'), T0 + 121_000, 'router-b', DEFAULT_POLICY).result).toBe('CLAIMED');
    expect(releaseProbe(a.record, 'router-b')).toBe(a.record);
    expect(claimProbe(CLOSED_RECORD, T0, 'router-a', DEFAULT_POLICY).result).toBe('CLOSED');
  });
});

describe('auto-eject (R-D13)', () => {
  const p: CircuitPolicy = { ...DEFAULT_POLICY, ejectMinVolume: 20, ejectProbes: 3 };

  it('ejects an agent whose 5-minute success rate falls below the threshold, with failures too sparse to trip the breaker', () => {
    const m = new Machine(p);
    // 4 outcomes a minute (under the breaker's volume of 10), 3 of them failures.
    for (let minute = 0; minute < 5; minute++) {
      const t = T0 + minute * 60_000;
      m.record(true, t)
        .record(false, t + 1)
        .record(false, t + 2)
        .record(false, t + 3);
    }
    expect(m.state(T0 + 4 * 60_000 + 3)).toBe('OPEN');
    expect(m.rec.reason).toBe('eject');
    expect(m.transitions).toEqual(['CLOSED->OPEN:eject']);
  });

  it('needs the minimum volume', () => {
    const m = new Machine(p);
    for (let i = 0; i < 19; i++) m.record(i % 4 === 0, T0 + i * 10_000);
    expect(m.state(T0 + 190_000)).toBe('CLOSED');
  });

  it('re-admits an ejected agent only after the configured successful probes in a row', () => {
    const m = new Machine(p);
    for (let i = 0; i < 20; i++) m.record(i % 4 === 0, T0 + i * 10_000);
    expect(m.rec.reason).toBe('eject');
    const half = m.rec.openUntil!;
    m.record(true, half);
    m.record(true, half + 1);
    expect(m.state(half + 1)).toBe('HALF_OPEN');
    expect(m.rec.probeOk).toBe(2);
    m.record(true, half + 2);
    expect(m.state(half + 2)).toBe('CLOSED');
    // Cleared windows: the old failures cannot eject it again.
    m.record(false, half + 3);
    expect(m.state(half + 3)).toBe('CLOSED');
  });

  it('a failed probe of an ejected agent ejects it again', () => {
    const m = new Machine(p);
    for (let i = 0; i < 20; i++) m.record(i % 4 === 0, T0 + i * 10_000);
    const half = m.rec.openUntil!;
    m.record(true, half).record(false, half + 5);
    expect(m.state(half + 5)).toBe('OPEN');
    expect(m.rec).toMatchObject({ reason: 'eject', probeOk: 0, openUntil: half + 5 + p.openMs });
  });
});
