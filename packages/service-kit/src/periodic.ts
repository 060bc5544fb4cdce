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

/** The gaps of a DueDrivenJob: never closer than `minGapMs`, never further apart than `maxGapMs`. */
export interface DueGaps {
  minGapMs: number;
  maxGapMs: number;
}

/**
 * A sweeper that runs when there is something due, not on a fixed tick. Each run returns the
 * next due time it saw (epoch ms; undefined: nothing), and the job sleeps until then: at least
 * `minGapMs` after the run (the sweep's granularity, as a PeriodicJob's interval), at most
 * `maxGapMs` (for work it cannot see coming: what another instance wrote after this run).
 * `wakeAt(t)` brings the next run forward for work this process adds. An idle stack then sweeps
 * every `maxGapMs` instead of every `minGapMs` (issue 27: the dispatcher's two deadline sweeps
 * ran 20 claim scripts a second with nothing due). A failed run is logged and tried again after
 * `minGapMs`; `stop()` waits for a run in progress.
 */
export class DueDrivenJob {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** Set from the start of a run (its synchronous part included) to its end. */
  private inRun = false;
  private stopped = false;
  /** When the timer fires (Infinity: no timer). */
  private nextAt = Infinity;
  /** The earliest wakeAt asked for while a run was in progress. */
  private wanted = Infinity;
  private lastEnd = 0;

  constructor(
    private readonly name: string,
    private readonly gaps: DueGaps,
    private readonly run: () => Promise<number | undefined>,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  start(): void {
    if (this.stopped) return; // stopped before it started (a shutdown during the first round)
    this.lastEnd = this.now();
    this.schedule(this.lastEnd + this.gaps.minGapMs);
  }

  /** Something is due at `at` (epoch ms): run by then, though not sooner than `minGapMs` after the last run. */
  wakeAt(at: number): void {
    if (this.stopped) return;
    if (this.inRun) {
      this.wanted = Math.min(this.wanted, at);
      return;
    }
    const when = Math.max(at, this.lastEnd + this.gaps.minGapMs);
    if (when < this.nextAt) this.schedule(when);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  private schedule(at: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.nextAt = at;
    this.timer = setTimeout(() => this.tick(), Math.max(0, at - this.now()));
  }

  private tick(): void {
    this.timer = undefined;
    this.nextAt = Infinity;
    if (this.stopped) return;
    this.inRun = true;
    this.running = Promise.resolve()
      .then(() => this.run())
      .catch((err: unknown) => {
        this.log.warn({ err, job: this.name }, `${this.name} failed; trying again shortly`);
        return -Infinity; // again after minGapMs
      })
      .then((due) => {
        this.running = undefined;
        this.inRun = false;
        this.lastEnd = this.now();
        if (this.stopped) return;
        const target = Math.min(due ?? Infinity, this.wanted, this.lastEnd + this.gaps.maxGapMs);
        this.wanted = Infinity;
        this.schedule(Math.max(target, this.lastEnd + this.gaps.minGapMs));
      });
  }
}

/**
 * A wake-up call to something built later: a producer of due times (e.g. the replay buffer,
 * which writes deadlines) is built before the job that sweeps them, and the job answers it.
 * Calls before `answer` are dropped: the job's first run finds what is due anyway.
 */
export class WakeAlarm {
  private listener: ((at: number) => void) | undefined;

  /** Something is due at `at` (epoch ms). */
  ring(at: number): void {
    this.listener?.(at);
  }

  answer(listener: (at: number) => void): void {
    this.listener = listener;
  }
}
