import type { Logger } from '@reach/core';

/**
 * A job that runs every `intervalMs` and never overlaps itself (the next run is scheduled when
 * the previous one ends), for sweepers. A failed run is logged and the job goes on; `stop()`
 * waits for a run in progress.
 */
export class PeriodicJob {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly name: string,
    private readonly intervalMs: number,
    private readonly run: () => Promise<unknown>,
    private readonly log: Logger,
  ) {}

  start(): void {
    const tick = (): void => {
      if (this.stopped) return;
      this.running = this.run()
        .then(() => undefined)
        .catch((err: unknown) => this.log.warn({ err, job: this.name }, `${this.name} failed; trying again next interval`))
        .finally(() => {
          this.running = undefined;
          if (!this.stopped) this.timer = setTimeout(tick, this.intervalMs);
        });
    };
    if (this.stopped) return; // stopped before it started (a shutdown during the first round)
    this.timer = setTimeout(tick, this.intervalMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }
}
