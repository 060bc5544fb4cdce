/**
 * Routers know an agent's load only from its heartbeats, which come every half lease (30 s by
 * default). A router that saw a node full holds the work meant for it (PENDING 2002) until it
 * sees a slot free again: without an early heartbeat, a task held for an agent whose only slot
 * had just freed waited up to 30 s for the next one. EarlyBeat asks for a heartbeat as soon as
 * the load crosses the busy line (half of max_concurrency) in either direction since the last
 * report: up, so routers stop choosing a full node; down, so they send it the held work. At
 * most one early heartbeat every `minGapMs`: a node that hovers around the line costs the
 * registry a heartbeat every two seconds, not one per handler.
 */
export const EARLY_BEAT_GAP_MS = 2_000;
/** The share of max_concurrency at or above which a node counts as busy for EarlyBeat. */
export const BUSY_SHARE = 0.5;

export interface EarlyBeatDeps {
  maxConcurrency: number;
  /** Handlers running now. */
  running: () => number;
  /** Sends a heartbeat now; false when one is already on its way (try again after the gap). */
  beat: () => boolean;
  minGapMs?: number;
  now?: () => number;
}

export class EarlyBeat {
  private lastAt = 0;
  /** Was the node busy in the last heartbeat? */
  private reportedBusy = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly gap: number;
  private readonly now: () => number;

  constructor(private readonly d: EarlyBeatDeps) {
    this.gap = d.minGapMs ?? EARLY_BEAT_GAP_MS;
    this.now = d.now ?? Date.now;
  }

  private busy(running: number): boolean {
    return running > 0 && running >= this.d.maxConcurrency * BUSY_SHARE;
  }

  /** A heartbeat (early or regular) reported `running` handlers. */
  sent(running: number): void {
    this.lastAt = this.now();
    this.reportedBusy = this.busy(running);
  }

  /** A handler started or ended. */
  changed(): void {
    if (this.stopped || this.timer || this.busy(this.d.running()) === this.reportedBusy) return;
    const fire = () => {
      this.timer = undefined;
      // crossed back meanwhile: the last report is right again
      if (this.stopped || this.busy(this.d.running()) === this.reportedBusy) return;
      if (!this.d.beat()) this.timer = setTimeout(fire, this.gap);
    };
    this.timer = setTimeout(fire, Math.max(0, this.lastAt + this.gap - this.now()));
    this.timer.unref?.();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
