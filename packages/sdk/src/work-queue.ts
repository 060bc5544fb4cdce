/**
 * Runs at most `limit` jobs at once (the agent's max_concurrency); the rest wait in a FIFO.
 * `running` and `queued` are what heartbeats report as current_load and queue_length.
 */
export class WorkQueue<T> {
  private readonly waiting: T[] = [];
  private active = 0;
  private idleWaiters: Array<() => void> = [];

  constructor(
    private readonly limit: number,
    private readonly run: (item: T) => Promise<void>,
    /** Called after jobs started or one ended (`running` changed). */
    private readonly onRunningChanged: () => void = () => undefined,
  ) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`concurrency limit must be a positive integer, got ${limit}`);
  }

  get running(): number {
    return this.active;
  }

  get queued(): number {
    return this.waiting.length;
  }

  push(item: T): void {
    const before = this.active;
    this.waiting.push(item);
    this.pump();
    if (this.active !== before) this.onRunningChanged();
  }

  /** Removes and returns every job that has not started yet. */
  takeQueued(): T[] {
    return this.waiting.splice(0);
  }

  /** Resolves when no job runs and none waits. */
  idle(): Promise<void> {
    if (this.active === 0 && this.waiting.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    while (this.active < this.limit && this.waiting.length > 0) {
      const item = this.waiting.shift()!;
      this.active++;
      // `run` owns its errors; the catch only keeps a bug there from stalling the queue.
      this.run(item)
        .catch(() => undefined)
        .finally(() => {
          const before = this.active;
          this.active--;
          this.pump(); // the next waiting job takes the freed slot: then `running` did not change
          if (this.active !== before) this.onRunningChanged();
          if (this.active === 0 && this.waiting.length === 0) for (const w of this.idleWaiters.splice(0)) w();
        });
    }
  }
}
