import type { Logger } from '@reach/core';
import type { CircuitBreakers, OpenCircuit } from './breakers.js';
import type { CircuitState, ClaimResult } from './policy.js';

export interface CircuitCacheOptions {
  readonly breakers: CircuitBreakers;
  /** Identity of this router instance: the holder of the probes it claims. */
  readonly instanceId: string;
  readonly logger: Logger;
  /** How often the map is refreshed from Redis (≤ 1 s, so an opened circuit stops traffic within a second). */
  readonly refreshMs?: number;
  /** Called after every successful refresh with the number of circuits per state. */
  onSnapshot?(counts: Readonly<Record<'OPEN' | 'HALF_OPEN', number>>): void;
  /** Called for each transition seen between two refreshes (to = the new state). */
  onTransition?(to: CircuitState): void;
}

/** A probe claim slower than this counts as failed (the message is routed without the probe). */
const CLAIM_TIMEOUT_MS = 100;

/**
 * Rejects when `op` has not settled within `ms`: a Redis that accepts connections but never
 * answers must not hold up routing (R-D12).
 */
function within<T>(op: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what}: redis did not answer within ${ms} ms`)), ms);
    op.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

/** What the candidate filter needs to know about one agent at `now`. */
export type CircuitVerdict = 'closed' | 'open' | 'half_open';

/**
 * The router's local copy of every non-CLOSED circuit (R-B2 "circuit not open"): routing
 * asks it synchronously, with no Redis call per message. It is refreshed from Redis every
 * `refreshMs` by one script that lists the open set (normally a handful of agents). While
 * Redis is unreachable the last map is kept (R-D12: routing continues from local state);
 * an OPEN circuit whose open period ends turns half-open locally, and its probe then needs a
 * Redis claim, so a broken agent is not flooded while nobody can coordinate.
 */
export class CircuitCache {
  private map = new Map<string, OpenCircuit>();
  private timer: NodeJS.Timeout | undefined;
  private refreshing: Promise<void> | undefined;
  private failing = false;
  private readonly refreshMs: number;

  constructor(private readonly opts: CircuitCacheOptions) {
    this.refreshMs = opts.refreshMs ?? 500;
  }

  /** Loads the map once (so the first messages already see open circuits), then follows it. */
  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => {
      void this.refresh();
    }, this.refreshMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Number of non-CLOSED circuits held. */
  get size(): number {
    return this.map.size;
  }

  /** Refreshes the map now; concurrent callers share one round trip. Never throws. */
  refresh(now: number = Date.now()): Promise<void> {
    this.refreshing ??= this.load(now).finally(() => {
      this.refreshing = undefined;
    });
    return this.refreshing;
  }

  private async load(now: number): Promise<void> {
    let list: OpenCircuit[];
    try {
      list = await within(this.opts.breakers.openCircuits(now), Math.max(this.refreshMs * 2, 1000), 'circuit refresh');
    } catch (err) {
      if (!this.failing) this.opts.logger.warn({ err: { message: (err as Error).message } }, 'circuits: refresh failed; keeping the last known circuits');
      this.failing = true;
      return;
    }
    if (this.failing) this.opts.logger.info({ circuits: list.length }, 'circuits: refresh restored');
    this.failing = false;
    const next = new Map(list.map((c) => [c.agentId, c]));
    if (this.opts.onTransition) {
      for (const [id, c] of next) {
        const before = this.map.get(id);
        if (!before || before.state !== c.state) this.opts.onTransition(c.state);
      }
      for (const id of this.map.keys()) if (!next.has(id)) this.opts.onTransition('CLOSED');
    }
    for (const [id, c] of next) {
      const before = this.map.get(id);
      if (!before || before.state !== c.state || before.reason !== c.reason) {
        this.opts.logger.info({ agent_id: id, state: c.state, reason: c.reason, open_until: c.openUntil }, 'circuit not closed');
      }
    }
    for (const id of this.map.keys()) if (!next.has(id)) this.opts.logger.info({ agent_id: id, state: 'CLOSED' }, 'circuit closed');
    this.map = next;
    const counts = { OPEN: 0, HALF_OPEN: 0 };
    for (const c of next.values()) counts[c.state] += 1;
    this.opts.onSnapshot?.(counts);
  }

  /** The agent's circuit at `now`, from the local map only. */
  verdict(agentId: string, now: number): CircuitVerdict {
    const c = this.map.get(agentId);
    if (!c) return 'closed';
    if (c.state === 'OPEN' && (c.openUntil === null || now < c.openUntil)) return 'open';
    return 'half_open';
  }

  /**
   * Claims the agent's half-open probe for this instance. A Redis failure counts as not
   * claimed: the agent stays out of candidacy. A CLOSED answer means the map is behind: the
   * agent is dropped from it at once.
   */
  async claimProbe(agentId: string, now: number = Date.now()): Promise<ClaimResult> {
    let res: ClaimResult;
    try {
      res = await within(this.opts.breakers.claimProbe(agentId, this.opts.instanceId, now), CLAIM_TIMEOUT_MS, 'probe claim');
    } catch (err) {
      this.opts.logger.debug({ agent_id: agentId, err: { message: (err as Error).message } }, 'circuits: probe claim failed');
      return 'OPEN';
    }
    if (res === 'CLOSED') this.map.delete(agentId);
    return res;
  }

  /** Gives back a probe this instance claimed but did not send. */
  async releaseProbe(agentId: string): Promise<void> {
    try {
      await within(this.opts.breakers.releaseProbe(agentId, this.opts.instanceId), CLAIM_TIMEOUT_MS, 'probe release');
    } catch (err) {
      // The claim expires after REACH_CIRCUIT_PROBE_TIMEOUT_MS anyway.
      this.opts.logger.debug({ agent_id: agentId, err: { message: (err as Error).message } }, 'circuits: probe release failed');
    }
  }
}
