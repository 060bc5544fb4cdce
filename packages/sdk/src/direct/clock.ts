/**
 * The LocalReach's time: the wall clock plus whatever a test skipped. Everything the local
 * control plane waits for — a retry's backoff, an ack deadline, a saturation hold, a parked
 * message's end — is a timer on this clock, so `skip(ms)` makes it due at once, in order, as if
 * that much time had passed (Temporal's test environment does the same). Handlers and the
 * node's own timers run in real time: skipping never hurries a handler.
 */
export interface BusTimer {
  readonly at: number;
}

interface Entry extends BusTimer {
  readonly fire: () => void;
  handle: NodeJS.Timeout | undefined;
}

export class BusClock {
  private offsetMs = 0;
  /** While skip() fires a timer, time stands at that timer's moment. */
  private firingAt: number | undefined;
  private readonly timers = new Set<Entry>();

  /** Epoch ms as the control plane sees it: real time plus the time skipped. */
  now(): number {
    return this.firingAt ?? Date.now() + this.offsetMs;
  }

  /** How far this clock is ahead of the wall clock. */
  get skipped(): number {
    return this.offsetMs;
  }

  /** Runs `fire` once `delayMs` of this clock's time has passed (sooner when time is skipped). */
  after(delayMs: number, fire: () => void): BusTimer {
    const entry: Entry = { at: this.now() + Math.max(0, delayMs), fire, handle: undefined };
    this.timers.add(entry);
    this.arm(entry);
    return entry;
  }

  cancel(timer: BusTimer | undefined): void {
    if (!timer) return;
    const entry = timer as Entry;
    clearTimeout(entry.handle);
    this.timers.delete(entry);
  }

  /** Moves time forward by `ms`: every timer due by then fires, earliest first (also those it schedules). */
  skip(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`skip(${ms}): time only moves forward`);
    const target = this.now() + ms;
    for (;;) {
      let next: Entry | undefined;
      for (const e of this.timers) if (e.at <= target && (next === undefined || e.at < next.at)) next = e;
      if (!next) break;
      // Time stands at the timer's moment while it fires: what it schedules is relative to then.
      this.firingAt = next.at;
      this.cancel(next);
      try {
        next.fire();
      } finally {
        this.firingAt = undefined;
      }
    }
    this.offsetMs += ms;
    // What is left is due later: re-armed for what remains of its wait.
    for (const e of this.timers) this.arm(e);
  }

  /** Cancels every timer (the LocalReach closes). */
  clear(): void {
    for (const e of this.timers) clearTimeout(e.handle);
    this.timers.clear();
  }

  private arm(entry: Entry): void {
    clearTimeout(entry.handle);
    entry.handle = setTimeout(
      () => {
        this.timers.delete(entry);
        entry.fire();
      },
      Math.max(0, entry.at - this.now()),
    );
    // A process whose nodes have all stopped may end although the control plane still waits.
    entry.handle.unref();
  }
}
