/**
 * The circuit breaker of one target agent as a pure state machine (R-D8, R-D13), with an
 * injected clock. The shared, authoritative copy runs as a Lua script in Redis (`lua.ts`)
 * that implements exactly these rules; this module is the readable reference, the unit-tested
 * one, and the one the conformance test replays against the script.
 *
 * Rules (opossum's semantics, shared by every instance):
 * - CLOSED: every outcome is counted in rolling buckets. Failure rate > `errorRate` over
 *   `windowMs` with at least `minVolume` outcomes → OPEN (reason `failure_rate`). Success rate
 *   < `ejectSuccessRate` over the longer `ejectWindowMs` with at least `ejectMinVolume`
 *   outcomes → OPEN (reason `eject`, auto-eject of R-D13).
 * - OPEN until `open_until` (= opened_at + `openMs`, fixed when it opened, so every instance
 *   agrees whatever its own config): no traffic; late outcomes of deliveries made before it
 *   opened are ignored.
 * - HALF_OPEN (OPEN past open_until): one probe at a time, claimed atomically by one router
 *   instance. A failure re-opens it; a success closes it (an ejected agent needs
 *   `ejectProbes` successful probes in a row). Closing clears the windows, so the failures
 *   that opened it cannot open it again.
 */

export type CircuitState = 'CLOSED' | 'OPEN' | 'HALF_OPEN';
export type OpenReason = 'failure_rate' | 'eject';

export interface CircuitPolicy {
  /** REACH_CIRCUIT_ERROR_RATE: open above this failure rate. */
  readonly errorRate: number;
  /** REACH_CIRCUIT_WINDOW_MS: the rolling window of the failure rate. */
  readonly windowMs: number;
  /** REACH_CIRCUIT_MIN_VOLUME: fewer outcomes in the window never open the circuit. */
  readonly minVolume: number;
  /** REACH_CIRCUIT_OPEN_MS: how long an opened circuit stays OPEN before probing. */
  readonly openMs: number;
  /** REACH_EJECT_SUCCESS_RATE: eject below this success rate over the eject window. */
  readonly ejectSuccessRate: number;
  /** REACH_EJECT_WINDOW_MS: the "recent" window of auto-eject (5 min). */
  readonly ejectWindowMs: number;
  /** REACH_EJECT_MIN_VOLUME */
  readonly ejectMinVolume: number;
  /** REACH_EJECT_PROBES: successful probes that re-admit an ejected agent. */
  readonly ejectProbes: number;
  /** REACH_CIRCUIT_PROBE_TIMEOUT_MS: a claimed probe with no outcome after this may be re-claimed. */
  readonly probeTimeoutMs: number;
}

export const DEFAULT_POLICY: CircuitPolicy = {
  errorRate: 0.5,
  windowMs: 60_000,
  minVolume: 10,
  openMs: 120_000,
  ejectSuccessRate: 0.5,
  ejectWindowMs: 300_000,
  ejectMinVolume: 20,
  ejectProbes: 3,
  probeTimeoutMs: 30_000,
};

/** The per-agent record (Redis hash `reach:circuit:{agent}`). */
export interface CircuitRecord {
  readonly state: CircuitState;
  readonly reason: OpenReason | null;
  readonly openedAt: number | null;
  readonly openUntil: number | null;
  /** Instance holding the current half-open probe, until `probeUntil`. */
  readonly probeBy: string | null;
  readonly probeUntil: number | null;
  /** Successful probes so far in this half-open period. */
  readonly probeOk: number;
}

export const CLOSED_RECORD: CircuitRecord = { state: 'CLOSED', reason: null, openedAt: null, openUntil: null, probeBy: null, probeUntil: null, probeOk: 0 };

/**
 * Rolling counters (Redis hash `reach:circuit:{agent}:win`): field `s:<bucket>:ok|ko` for the
 * breaker window, `l:<bucket>:ok|ko` for the eject window; a bucket is `floor(now / size)`.
 */
export type Counters = ReadonlyMap<string, number>;

/** 60 buckets per breaker window (1 s by default), 30 per eject window (10 s by default). */
export const SHORT_BUCKETS = 60;
export const LONG_BUCKETS = 30;

export function bucketSizes(p: CircuitPolicy): { short: number; long: number } {
  return { short: Math.max(1, Math.floor(p.windowMs / SHORT_BUCKETS)), long: Math.max(1, Math.floor(p.ejectWindowMs / LONG_BUCKETS)) };
}

export interface WindowTotals {
  readonly ok: number;
  readonly fail: number;
}

/** Sums the buckets of one window (`s` or `l`) that are inside it at `now`. */
export function windowTotals(counters: Counters, prefix: 's' | 'l', windowMs: number, size: number, now: number): WindowTotals {
  const current = Math.floor(now / size);
  const span = Math.ceil(windowMs / size);
  let ok = 0;
  let fail = 0;
  for (const [field, n] of counters) {
    const [p, idx, kind] = field.split(':');
    if (p !== prefix) continue;
    const i = Number(idx);
    if (i <= current - span || i > current) continue;
    if (kind === 'ok') ok += n;
    else fail += n;
  }
  return { ok, fail };
}

/** Drops buckets that left their window (the script does the same with HDEL). */
export function prune(counters: Counters, p: CircuitPolicy, now: number): Map<string, number> {
  const sizes = bucketSizes(p);
  const out = new Map<string, number>();
  for (const [field, n] of counters) {
    const [prefix, idx] = field.split(':');
    const size = prefix === 's' ? sizes.short : sizes.long;
    const windowMs = prefix === 's' ? p.windowMs : p.ejectWindowMs;
    if (Number(idx) > Math.floor(now / size) - Math.ceil(windowMs / size)) out.set(field, n);
  }
  return out;
}

/** OPEN past its open_until is HALF_OPEN: no writer is needed for that move. */
export function effectiveState(rec: CircuitRecord, now: number): CircuitState {
  if (rec.state === 'OPEN' && rec.openUntil !== null && now >= rec.openUntil) return 'HALF_OPEN';
  return rec.state;
}

export interface Transition {
  readonly from: CircuitState;
  readonly to: CircuitState;
  readonly reason: OpenReason | null;
}

export interface RecordResult {
  readonly record: CircuitRecord;
  readonly counters: Map<string, number>;
  readonly transition: Transition | null;
}

function opened(reason: OpenReason, now: number, p: CircuitPolicy): CircuitRecord {
  return { state: 'OPEN', reason, openedAt: now, openUntil: now + p.openMs, probeBy: null, probeUntil: null, probeOk: 0 };
}

/**
 * Records `count` delivery outcomes of one kind (ack = ok; reject / ack timeout / push failure =
 * not ok), e.g. the acks a dispatcher gathered over a short window. While HALF_OPEN a batch
 * counts as one probe outcome: only one probe is let through at a time, so several outcomes at
 * once are of deliveries sent before the circuit opened and prove no more than one.
 */
export function recordOutcome(rec: CircuitRecord, counters: Counters, ok: boolean, now: number, p: CircuitPolicy, count = 1): RecordResult {
  const state = effectiveState(rec, now);
  if (state === 'OPEN') return { record: rec, counters: new Map(counters), transition: null };
  if (state === 'HALF_OPEN') {
    if (!ok) {
      return {
        record: opened(rec.reason ?? 'failure_rate', now, p),
        counters: new Map(counters),
        transition: { from: 'HALF_OPEN', to: 'OPEN', reason: rec.reason },
      };
    }
    const needed = rec.reason === 'eject' ? p.ejectProbes : 1;
    const probeOk = rec.probeOk + 1;
    if (probeOk >= needed) return { record: CLOSED_RECORD, counters: new Map(), transition: { from: 'HALF_OPEN', to: 'CLOSED', reason: null } };
    // Not yet re-admitted: free the probe slot so the next probe can go.
    return { record: { ...rec, state: 'HALF_OPEN', probeBy: null, probeUntil: null, probeOk }, counters: new Map(counters), transition: null };
  }
  const sizes = bucketSizes(p);
  const next = prune(counters, p, now);
  const kind = ok ? 'ok' : 'ko';
  const sField = `s:${Math.floor(now / sizes.short)}:${kind}`;
  const lField = `l:${Math.floor(now / sizes.long)}:${kind}`;
  next.set(sField, (next.get(sField) ?? 0) + count);
  next.set(lField, (next.get(lField) ?? 0) + count);
  const short = windowTotals(next, 's', p.windowMs, sizes.short, now);
  const shortTotal = short.ok + short.fail;
  if (shortTotal >= p.minVolume && short.fail / shortTotal > p.errorRate) {
    return { record: opened('failure_rate', now, p), counters: next, transition: { from: 'CLOSED', to: 'OPEN', reason: 'failure_rate' } };
  }
  const long = windowTotals(next, 'l', p.ejectWindowMs, sizes.long, now);
  const longTotal = long.ok + long.fail;
  if (longTotal >= p.ejectMinVolume && long.ok / longTotal < p.ejectSuccessRate) {
    return { record: opened('eject', now, p), counters: next, transition: { from: 'CLOSED', to: 'OPEN', reason: 'eject' } };
  }
  return { record: rec, counters: next, transition: null };
}

export type ClaimResult =
  /** This instance may send the probe now. */
  | 'CLAIMED'
  /** The circuit is closed: no probe needed, route normally. */
  | 'CLOSED'
  /** Still open: nothing may go. */
  | 'OPEN'
  /** Another instance holds the probe. */
  | 'BUSY';

/**
 * Claims the single half-open probe for `instance`. A live claim is BUSY for everyone, its
 * holder included: a claim is one message, so a second message on the same instance must not
 * become a second probe. The holder gives an unsent claim back with `releaseProbe`.
 */
export function claimProbe(rec: CircuitRecord, now: number, instance: string, p: CircuitPolicy): { record: CircuitRecord; result: ClaimResult } {
  const state = effectiveState(rec, now);
  if (state !== 'HALF_OPEN') return { record: rec, result: state };
  if (rec.probeBy !== null && rec.probeUntil !== null && rec.probeUntil > now) return { record: rec, result: 'BUSY' };
  return { record: { ...rec, state: 'HALF_OPEN', probeBy: instance, probeUntil: now + p.probeTimeoutMs }, result: 'CLAIMED' };
}

/** Gives back a claimed probe that was not sent (the message went elsewhere). */
export function releaseProbe(rec: CircuitRecord, instance: string): CircuitRecord {
  if (rec.probeBy !== instance) return rec;
  return { ...rec, probeBy: null, probeUntil: null };
}
