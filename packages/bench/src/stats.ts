/** Latency samples (ms) and the percentiles the benchmark tables print. */
export class Samples {
  private readonly values: number[] = [];

  add(ms: number): void {
    this.values.push(ms);
  }

  get count(): number {
    return this.values.length;
  }

  summary(): { count: number; p50: number; p95: number; p99: number; max: number } {
    const v = [...this.values].sort((a, b) => a - b);
    const at = (q: number) => (v.length === 0 ? NaN : v[Math.min(v.length - 1, Math.floor(q * v.length))]!);
    return { count: v.length, p50: at(0.5), p95: at(0.95), p99: at(0.99), max: v.length ? v[v.length - 1]! : NaN };
  }
}

/**
 * Calls `send(n)` so that `rate` messages per second go out for `durationMs`, in ticks of 10 ms
 * (rate 0 = as fast as `send` completes), or until `done()` says so. Returns how many were sent.
 */
export async function drive(rate: number, durationMs: number, send: (n: number) => Promise<void>, done: () => boolean = () => false): Promise<number> {
  const started = performance.now();
  let sent = 0;
  const inFlight = new Set<Promise<void>>();
  while (performance.now() - started < durationMs && !done()) {
    if (rate <= 0) {
      await send(500);
      sent += 500;
      continue;
    }
    const due = Math.floor(((performance.now() - started) / 1000) * rate) - sent;
    if (due > 0) {
      const p = send(due).finally(() => inFlight.delete(p));
      inFlight.add(p);
      sent += due;
      // Bounded pipelining: never more than a few ticks of sends outstanding.
      if (inFlight.size >= 8) await Promise.race(inFlight);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  await Promise.all(inFlight);
  return sent;
}

export function fmt(n: number, digits = 1): string {
  return Number.isFinite(n) ? n.toFixed(digits) : '—';
}
