/**
 * Brute-force protection (issue #13): failed authentications (HTTP 401, a refused WebSocket
 * hello) are counted per source address in fixed windows; an address past `limit` failures in
 * its window is refused — every credentialed request, with 429 4129 RATE_LIMITED and
 * Retry-After — until the window ends, so tokens cannot be guessed at speed. Per process: with
 * N instances behind a balancer an address gets up to N × the limit. Memory is bounded: when
 * more than `maxAddresses` are tracked, ended windows are dropped first, then the oldest.
 */
export interface AuthThrottleOptions {
  /** REACH_AUTH_FAILURE_LIMIT */
  readonly limit: number;
  /** REACH_AUTH_FAILURE_WINDOW_S, in ms */
  readonly windowMs: number;
  readonly maxAddresses?: number;
}

interface Window {
  startedAt: number;
  failures: number;
}

export class AuthFailureThrottle {
  private readonly windows = new Map<string, Window>();
  private readonly maxAddresses: number;

  constructor(private readonly o: AuthThrottleOptions) {
    this.maxAddresses = o.maxAddresses ?? 100_000;
  }

  /** Seconds until `address` may try again, or undefined when it is not blocked. */
  retryAfterS(address: string | undefined, nowMs: number = Date.now()): number | undefined {
    const w = address === undefined ? undefined : this.windows.get(address);
    if (!w || w.failures < this.o.limit) return undefined;
    const left = w.startedAt + this.o.windowMs - nowMs;
    return left > 0 ? Math.max(1, Math.ceil(left / 1000)) : undefined;
  }

  /** Counts one failed authentication from `address`. */
  failed(address: string | undefined, nowMs: number = Date.now()): void {
    if (address === undefined) return;
    let w = this.windows.get(address);
    if (!w || nowMs - w.startedAt >= this.o.windowMs) {
      if (!w && this.windows.size >= this.maxAddresses) this.evict(nowMs);
      this.windows.set(address, (w = { startedAt: nowMs, failures: 0 }));
    }
    w.failures++;
  }

  get size(): number {
    return this.windows.size;
  }

  private evict(nowMs: number): void {
    for (const [a, w] of this.windows) if (nowMs - w.startedAt >= this.o.windowMs) this.windows.delete(a);
    // Still full: drop the oldest (Map keeps insertion order).
    while (this.windows.size >= this.maxAddresses) this.windows.delete(this.windows.keys().next().value!);
  }
}
