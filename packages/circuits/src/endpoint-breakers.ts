import CircuitBreaker from 'opossum';
import type { OutcomeResult } from './breakers.js';
import type { CircuitPolicy } from './policy.js';

/** Where call outcomes are shared (a `CircuitBreakers`; an interface so tests can watch it). */
export interface OutcomeRecorder {
  recordOutcome(agentId: string, ok: boolean, now?: number): Promise<OutcomeResult>;
}

export interface EndpointBreakersOptions {
  /** The timeout of one call (e.g. REACH_HTTP_PUSH_TIMEOUT_MS). */
  readonly timeoutMs: number;
  /** The same thresholds as the shared breaker, so local and shared agree on what "broken" is. */
  readonly policy: CircuitPolicy;
  /** The shared breaker every outcome is reported to; absent = local only. */
  readonly shared?: OutcomeRecorder;
  /** A failure to report an outcome (Redis away): never fails the call itself. */
  onSharedError?(err: unknown): void;
}

/** Thrown (as opossum does) when the local breaker of the endpoint is open: no call was made. */
export const LOCAL_OPEN_CODE = 'EOPENBREAKER';

/**
 * opossum where it fits: around single calls to one endpoint inside one process, e.g. the
 * dispatcher's HTTP push to an agent. opossum gives each call its timeout (aborting the request
 * through the signal it is handed) and fails fast locally while the endpoint is broken, without
 * a Redis round trip per call. Its state is per process, so it does not decide routing: every
 * real outcome is also recorded in the shared Redis breaker (`CircuitBreakers`), which is the
 * one all routers and dispatchers agree on. A call refused by the local open breaker made no
 * delivery attempt and is not reported.
 */
export class EndpointBreakers {
  private readonly breakers = new Map<string, CircuitBreaker<[AbortSignal, () => Promise<unknown>], unknown>>();

  constructor(private readonly opts: EndpointBreakersOptions) {}

  /** Runs `fn` through the endpoint's breaker; `agentId` is whose shared circuit the outcome counts for. */
  async call<T>(agentId: string, endpoint: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const breaker = this.breakerOf(endpoint);
    const ac = new AbortController();
    try {
      const value = (await breaker.fire(ac.signal, () => fn(ac.signal))) as T;
      this.share(agentId, true);
      return value;
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code === 'ETIMEDOUT') ac.abort(err);
      if (code !== LOCAL_OPEN_CODE) this.share(agentId, false);
      throw err;
    }
  }

  /** The local breaker state of an endpoint (for logs and tests). */
  stateOf(endpoint: string): 'CLOSED' | 'OPEN' | 'HALF_OPEN' {
    const b = this.breakers.get(endpoint);
    if (!b) return 'CLOSED';
    return b.opened ? 'OPEN' : b.halfOpen ? 'HALF_OPEN' : 'CLOSED';
  }

  /** Forgets an endpoint (its agent deregistered). */
  forget(endpoint: string): void {
    this.breakers.get(endpoint)?.shutdown();
    this.breakers.delete(endpoint);
  }

  close(): void {
    for (const b of this.breakers.values()) b.shutdown();
    this.breakers.clear();
  }

  private breakerOf(endpoint: string): CircuitBreaker<[AbortSignal, () => Promise<unknown>], unknown> {
    let b = this.breakers.get(endpoint);
    if (b) return b;
    const p = this.opts.policy;
    b = new CircuitBreaker((_signal: AbortSignal, run: () => Promise<unknown>) => run(), {
      timeout: this.opts.timeoutMs,
      errorThresholdPercentage: p.errorRate * 100,
      rollingCountTimeout: p.windowMs,
      // opossum wants the window to split evenly into its buckets.
      rollingCountBuckets: p.windowMs % 60 === 0 ? 60 : 1,
      volumeThreshold: p.minVolume,
      resetTimeout: p.openMs,
    });
    this.breakers.set(endpoint, b);
    return b;
  }

  private share(agentId: string, ok: boolean): void {
    if (!this.opts.shared) return;
    this.opts.shared.recordOutcome(agentId, ok).catch((err: unknown) => this.opts.onSharedError?.(err));
  }
}
