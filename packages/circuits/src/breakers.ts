import { createHash } from 'node:crypto';
import type { Redis } from '@reach/store';
import { CLAIM_PROBE, RECORD_OUTCOME, RELEASE_PROBE, SNAPSHOT } from './lua.js';
import { bucketSizes, effectiveState, type CircuitPolicy, type CircuitRecord, type CircuitState, type ClaimResult, type OpenReason } from './policy.js';

export const CIRCUIT_KEY_PREFIX = 'reach:circuit:';
export const OPEN_SET_KEY = 'reach:circuits';

/** Hash-tagged, so an agent's state and counters live in one Redis Cluster slot. */
export const stateKey = (agentId: string): string => `${CIRCUIT_KEY_PREFIX}{${agentId}}`;
export const countersKey = (agentId: string): string => `${CIRCUIT_KEY_PREFIX}{${agentId}}:win`;

export interface OutcomeResult {
  /** The state after this outcome. */
  readonly state: CircuitState;
  /** Set when this outcome moved the circuit. */
  readonly transition: { readonly from: CircuitState; readonly to: CircuitState; readonly reason: OpenReason | null } | null;
}

/** A non-CLOSED circuit as routers see it. */
export interface OpenCircuit {
  readonly agentId: string;
  /** Effective state at the snapshot's `now` (OPEN past open_until reads HALF_OPEN). */
  readonly state: Exclude<CircuitState, 'CLOSED'>;
  readonly reason: OpenReason | null;
  readonly openUntil: number | null;
  readonly probeBy: string | null;
  readonly probeUntil: number | null;
}

const num = (s: string | null | undefined): number | null => (s === null || s === undefined || s === '' ? null : Number(s));
const reasonOf = (s: string | null | undefined): OpenReason | null => (s === 'failure_rate' || s === 'eject' ? s : null);

/** One Lua script, called by its SHA and loaded again when Redis answers NOSCRIPT (restart, SCRIPT FLUSH). */
class Script {
  private readonly sha: string;
  constructor(private readonly source: string) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  async run(redis: Redis, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return redis.eval(this.source, keys.length, ...keys, ...args);
    }
  }
}

const scripts = {
  record: new Script(RECORD_OUTCOME),
  claim: new Script(CLAIM_PROBE),
  release: new Script(RELEASE_PROBE),
  snapshot: new Script(SNAPSHOT),
};

/**
 * The shared breakers of every target agent, in Redis, so every dispatcher and router instance
 * agrees on each circuit (R-D8, R-D13). Why not opossum's own state: an opossum breaker
 * keeps its rolling window and state in one process, so with N dispatchers an agent failing on
 * every instance would need N× the failures to open, and routers (which decide where work goes)
 * would never see it. opossum's semantics are kept — rolling window, volume threshold, OPEN →
 * HALF_OPEN → one probe — but the state is one Redis hash per agent moved by atomic scripts.
 * A process-local opossum breaker still fits around a single call (e.g. one HTTP push with its
 * timeout), feeding its outcome here.
 *
 * Where outcomes must be recorded (the dispatcher): `recordOutcome(agent, true)` on an agent's
 * `ack`; `recordOutcome(agent, false)` on a `reject` that is not the agent refusing the content
 * on purpose (a retryable reject), on an ack timeout (3002), on a failed HTTP push or a send
 * to a dead socket (1001/1002). Outcomes of a circuit that is OPEN are ignored by design.
 */
export class CircuitBreakers {
  constructor(
    private readonly redis: Redis,
    readonly policy: CircuitPolicy,
  ) {}

  /**
   * Records `count` delivery outcomes of one kind for the agent and applies the transition they
   * cause, atomically (policy.ts recordOutcome: a batch is one probe while HALF_OPEN).
   */
  async recordOutcome(agentId: string, ok: boolean, now: number = Date.now(), count = 1): Promise<OutcomeResult> {
    const p = this.policy;
    const sizes = bucketSizes(p);
    const res = (await scripts.record.run(
      this.redis,
      [stateKey(agentId), countersKey(agentId), OPEN_SET_KEY],
      [
        agentId,
        ok ? 1 : 0,
        now,
        p.errorRate,
        p.windowMs,
        p.minVolume,
        p.openMs,
        p.ejectSuccessRate,
        p.ejectWindowMs,
        p.ejectMinVolume,
        p.ejectProbes,
        sizes.short,
        sizes.long,
        count,
      ],
    )) as [CircuitState, string, string];
    const [state, from, reason] = res;
    return { state, transition: from ? { from: from as CircuitState, to: state, reason: reasonOf(reason) } : null };
  }

  /** The agent's circuit as stored, with its effective state at `now`. */
  async state(agentId: string, now: number = Date.now()): Promise<CircuitRecord & { readonly effective: CircuitState }> {
    const [state, reason, openedAt, openUntil, probeBy, probeUntil, probeOk] = await this.redis.hmget(
      stateKey(agentId),
      'state',
      'reason',
      'opened_at',
      'open_until',
      'probe_by',
      'probe_until',
      'probe_ok',
    );
    const rec: CircuitRecord = {
      state: state === 'OPEN' || state === 'HALF_OPEN' ? state : 'CLOSED',
      reason: reasonOf(reason),
      openedAt: num(openedAt),
      openUntil: num(openUntil),
      probeBy: probeBy ?? null,
      probeUntil: num(probeUntil),
      probeOk: num(probeOk) ?? 0,
    };
    return { ...rec, effective: effectiveState(rec, now) };
  }

  /** Claims the one half-open probe of the agent for `instance` (atomic across instances). */
  async claimProbe(agentId: string, instance: string, now: number = Date.now()): Promise<ClaimResult> {
    return (await scripts.claim.run(this.redis, [stateKey(agentId)], [now, instance, this.policy.probeTimeoutMs])) as ClaimResult;
  }

  /** Gives a claimed probe back (the message went to another agent). */
  async releaseProbe(agentId: string, instance: string): Promise<boolean> {
    return (await scripts.release.run(this.redis, [stateKey(agentId)], [instance])) === 1;
  }

  /** Every non-CLOSED circuit: what a router's local cache refreshes from. */
  async openCircuits(now: number = Date.now(), limit = 100_000): Promise<OpenCircuit[]> {
    const flat = (await scripts.snapshot.run(this.redis, [OPEN_SET_KEY], [CIRCUIT_KEY_PREFIX, limit])) as string[];
    const out: OpenCircuit[] = [];
    for (let i = 0; i + 5 < flat.length; i += 6) {
      const openUntil = num(flat[i + 3]);
      const stored = flat[i + 1] === 'HALF_OPEN' ? 'HALF_OPEN' : 'OPEN';
      const state = stored === 'OPEN' && openUntil !== null && now >= openUntil ? 'HALF_OPEN' : stored;
      out.push({
        agentId: flat[i]!,
        state,
        reason: reasonOf(flat[i + 2]),
        openUntil,
        probeBy: flat[i + 4] || null,
        probeUntil: num(flat[i + 5]),
      });
    }
    return out;
  }

  /** Forgets the agent's circuit (admin / tests). */
  async reset(agentId: string): Promise<void> {
    await this.redis.multi().del(stateKey(agentId), countersKey(agentId)).zrem(OPEN_SET_KEY, agentId).exec();
  }
}
