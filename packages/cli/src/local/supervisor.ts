import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readFileSync, existsSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';

/**
 * Runs the local stack's processes: each with its log in .reach/logs/<name>.log, started in
 * order and checked for readiness, restarted when it dies unexpectedly (the "supervised
 * restart" services rely on: a service exits on a fatal error instead of limping on), and
 * stopped in reverse order with SIGTERM, then SIGKILL after its grace period.
 *
 * Restarts: a crash comes back at once (100 ms), so a killed instance serves again within its
 * own start time. Only a crash loop backs off: crashes of runs shorter than STABLE_RUN_MS, each
 * within five minutes of the last, wait 1 s, 2 s, 4 s … up to 30 s, and the 10th gives up (a
 * crash loop is a bug to read in the log). A process that had run for STABLE_RUN_MS before it
 * died starts the count afresh: a service killed now and then must not come back later each time.
 */
export interface ProcessSpec {
  name: string;
  cmd: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  ready: () => Promise<boolean>;
  readyTimeoutMs: number;
  stopTimeoutMs: number;
  /** Processes of one group that are neighbours in start order are stopped at the same time. */
  stopGroup?: string;
  /**
   * Runs when the process exited unexpectedly, before it is restarted (e.g. leave the consumer
   * groups it was a member of, so its partitions move at once). Its failure is only reported.
   */
  afterExit?: () => Promise<string | undefined>;
}

interface Running {
  spec: ProcessSpec;
  child: ChildProcess;
  log: WriteStream;
  exited: Promise<number | null>;
  /** Times of the crashes of the current crash loop (restart backoff). */
  restarts: number[];
  startedAt: number;
  /** How many times this process was restarted since the supervisor started it. */
  generation: number;
}

/** The exit code of a process (the JVM) that stopped on SIGTERM: a polite stop, not a crash. */
export const SIGTERM_EXIT = 143;

/** A run this long before its crash was no crash loop: the backoff starts again. */
export const STABLE_RUN_MS = 30_000;
const CRASH_LOOP_WINDOW_MS = 5 * 60_000;

/** The earlier crashes (times) that count towards the backoff of a crash at `now` after a run of `ranMs`. */
export function crashLoop(previous: readonly number[], now: number, ranMs: number): number[] {
  if (ranMs >= STABLE_RUN_MS) return [];
  return previous.filter((t) => now - t < CRASH_LOOP_WINDOW_MS);
}

/** Delay before restarting a process that exited: `recentCrashes` earlier crashes of its crash loop (crashLoop). */
export function restartDelayMs(crashed: boolean, recentCrashes: number): number {
  if (!crashed) return 200;
  return recentCrashes === 0 ? 100 : Math.min(30_000, 1000 * 2 ** (recentCrashes - 1));
}

export function tail(file: string, lines = 30): string {
  if (!existsSync(file)) return '';
  return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
}

export class Supervisor {
  private readonly procs: Running[] = [];
  private stopping = false;

  constructor(
    private readonly logDir: string,
    private readonly onEvent: (msg: string) => void,
    /** Called whenever the set of pids changes (a start or a restart), to persist it. */
    private readonly onPidsChanged: () => void = () => undefined,
  ) {}

  logFile(name: string): string {
    return join(this.logDir, `${name}.log`);
  }

  pids(): Array<{ name: string; pid: number | undefined; restarts: number }> {
    return this.procs.map((p) => ({ name: p.spec.name, pid: p.child.pid, restarts: p.generation }));
  }

  private spawnOne(spec: ProcessSpec, restarts: number[], generation = 0): Running {
    const log = createWriteStream(this.logFile(spec.name), { flags: 'a' });
    const child = spawn(spec.cmd, spec.args, { env: spec.env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.pipe(log, { end: false });
    child.stderr!.pipe(log, { end: false });
    // After its output is drained (not at 'exit', which may come first): one log stream per run.
    child.once('close', () => log.end());
    const exited = new Promise<number | null>((resolve) => {
      child.once('error', (err) => {
        log.write(`\n[reach] could not start ${spec.cmd}: ${err.message}\n`);
        resolve(-1);
      });
      child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : null)));
    });
    const running: Running = { spec, child, log, exited, restarts, generation, startedAt: Date.now() };
    void exited.then((code) => this.onExit(running, code));
    return running;
  }

  private onExit(r: Running, code: number | null): void {
    if (this.stopping || !this.procs.includes(r)) return;
    const now = Date.now();
    // Only crashes count towards the limit: a clean exit comes back at once. So does a stop by
    // SIGTERM (`reach restart`): the JVM exits 143 then, which counted as a crash and put a
    // broker restarted twice within 30 s into the crash-loop backoff (1 s, 2 s, 4 s, 8 s).
    const crashed = code !== 0 && code !== SIGTERM_EXIT;
    const recent = crashLoop(r.restarts, now, now - r.startedAt);
    if (crashed && recent.length >= 10) {
      this.onEvent(
        `${r.spec.name} crashed (${code}) 10 times in a row, each within ${STABLE_RUN_MS / 1000} s of its start; not restarting it. See ${this.logFile(r.spec.name)}`,
      );
      return;
    }
    const delay = restartDelayMs(crashed, recent.length);
    this.onEvent(`${r.spec.name} exited (${code}); restarting in ${delay / 1000}s`);
    void this.runAfterExit(r).then(() =>
      setTimeout(() => {
        if (this.stopping) return;
        const next = this.spawnOne(r.spec, crashed ? [...recent, now] : recent, r.generation + 1);
        next.log.write(`[reach] ${new Date().toISOString()} restarted ${r.spec.name} after it exited (${code})\n`);
        this.procs[this.procs.indexOf(r)] = next;
        this.onPidsChanged();
      }, delay).unref(),
    );
  }

  private async runAfterExit(r: Running): Promise<void> {
    if (!r.spec.afterExit) return;
    try {
      const said = await r.spec.afterExit();
      if (said) this.onEvent(`${r.spec.name}: ${said}`);
    } catch (err) {
      this.onEvent(`${r.spec.name}: after its exit: ${(err as Error).message}`);
    }
  }

  /** Starts a process and waits until it is ready; fails with its log tail if it dies or times out. */
  async start(spec: ProcessSpec): Promise<void> {
    const r = this.spawnOne(spec, []);
    this.procs.push(r);
    this.onPidsChanged();
    const deadline = Date.now() + spec.readyTimeoutMs;
    let exitCode: number | null | undefined;
    void r.exited.then((c) => (exitCode = c));
    for (;;) {
      if (exitCode !== undefined) {
        throw new Error(
          `${spec.name} exited with ${exitCode} before it was ready. Last lines of ${this.logFile(spec.name)}:\n${tail(this.logFile(spec.name))}`,
        );
      }
      if (await spec.ready().catch(() => false)) return;
      if (Date.now() > deadline) {
        throw new Error(
          `${spec.name} was not ready after ${spec.readyTimeoutMs / 1000}s. Last lines of ${this.logFile(spec.name)}:\n${tail(this.logFile(spec.name))}`,
        );
      }
      await new Promise((res) => setTimeout(res, 200));
    }
  }

  /** Stops everything in reverse start order. */
  async stopAll(): Promise<void> {
    this.stopping = true;
    const order = [...this.procs].reverse();
    // Neighbours of one stop group (the instances of a service, the nodes of a Kafka cluster)
    // stop together: one after another, the last Kafka node would wait for a quorum that is gone.
    for (let i = 0; i < order.length; ) {
      const group = order[i]!.spec.stopGroup;
      let j = i + 1;
      while (group !== undefined && j < order.length && order[j]!.spec.stopGroup === group) j++;
      await Promise.all(order.slice(i, j).map((r) => this.stopOne(r)));
      i = j;
    }
  }

  private async stopOne(r: Running): Promise<void> {
    if (r.child.exitCode === null && r.child.signalCode === null) {
      this.onEvent(`stopping ${r.spec.name}`);
      r.child.kill('SIGTERM');
      const killer = setTimeout(() => r.child.kill('SIGKILL'), r.spec.stopTimeoutMs);
      await r.exited;
      clearTimeout(killer);
    }
  }
}
