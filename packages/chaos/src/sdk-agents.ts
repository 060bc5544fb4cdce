import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Ledger } from './ledger.js';

const AGENT_PROCESS = fileURLToPath(new URL('./agent-process.js', import.meta.url));
const SPAWN_ATTEMPTS = 5;
const SPAWN_RETRY_MS = 2_000;

type FromAgent = { t: 'ready'; agents: string[] } | { t: 'start' | 'done'; key: string; id: string; agent: string; at: number };

interface Running {
  readonly child: ChildProcess;
  readonly tag: string;
  agents: string[];
  /** Handler executions started and not done yet (message ids). */
  readonly busy: Set<string>;
}

/**
 * The SDK agents of a chaos run, in child processes so a fault can kill one with SIGKILL in the
 * middle of its handlers. Every execution is entered in the ledger under the process's tag,
 * and a killed process is marked dead there, so its cut-off executions are told apart from
 * duplicates among live agents.
 */
export class SdkAgents {
  private readonly running: Running[] = [];
  private spawned = 0;

  constructor(
    private readonly capability: string,
    private readonly perProcess: number,
    private readonly handlerMs: number,
    private readonly ledger: Ledger,
  ) {}

  async start(processes: number): Promise<void> {
    await Promise.all(Array.from({ length: processes }, () => this.spawnRetrying()));
  }

  /**
   * Starts an agent process, again (up to SPAWN_ATTEMPTS) when one exits before it is ready: a
   * replacement started right after a broker restart may get no welcome from the saturated
   * dispatcher within the SDK's 10 s connect timeout (a long run died of that). A process that
   * exited is marked dead in the ledger: agents it had started may have taken deliveries, and
   * their cut-off runs are no duplicates among live agents.
   */
  private async spawnRetrying(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.spawn();
      } catch (err) {
        if (attempt >= SPAWN_ATTEMPTS) throw err;
        process.stderr.write(`  ${(err as Error).message}; starting another (${attempt}/${SPAWN_ATTEMPTS - 1})\n`);
        await new Promise((r) => setTimeout(r, SPAWN_RETRY_MS));
      }
    }
  }

  private spawn(): Promise<void> {
    const tag = `sdk-${++this.spawned}`;
    const child = fork(AGENT_PROCESS, [this.capability, String(this.perProcess), String(this.handlerMs)], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    const r: Running = { child, tag, agents: [], busy: new Set() };
    this.running.push(r);
    return new Promise<void>((resolve, reject) => {
      child.once('exit', (code, signal) => {
        this.ledger.killed(tag, Date.now());
        this.running.splice(this.running.indexOf(r), 1);
        reject(new Error(`agent process ${tag} exited (${code ?? signal}) before it was ready`));
      });
      child.on('message', (m: FromAgent) => {
        if (m.t === 'ready') {
          r.agents = m.agents;
          child.removeAllListeners('exit');
          resolve();
        } else if (m.t === 'start') {
          r.busy.add(m.id);
          this.ledger.execution(m.key, m.id, tag, m.at, false);
        } else {
          r.busy.delete(m.id);
          this.ledger.execution(m.key, m.id, tag, m.at, true);
        }
      });
    });
  }

  /**
   * SIGKILLs the process with the most handlers running (an agent killed mid-handler), then
   * starts a replacement so capacity stays. Returns how many handlers it cut off.
   */
  async killOneMidHandler(waitMs = 5_000): Promise<{ tag: string; cutOff: number }> {
    const end = Date.now() + waitMs;
    let victim = this.busiest();
    while (victim.busy.size === 0 && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 20));
      victim = this.busiest();
    }
    const cutOff = victim.busy.size;
    victim.child.kill('SIGKILL');
    this.ledger.killed(victim.tag, Date.now());
    this.running.splice(this.running.indexOf(victim), 1);
    await this.spawnRetrying();
    return { tag: victim.tag, cutOff };
  }

  private busiest(): Running {
    return this.running.reduce((a, b) => (b.busy.size > a.busy.size ? b : a));
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.running.map(
        (r) =>
          new Promise<void>((resolve) => {
            if (r.child.exitCode !== null) return resolve();
            const t = setTimeout(() => r.child.kill('SIGKILL'), 5_000);
            r.child.once('exit', () => {
              clearTimeout(t);
              resolve();
            });
            r.child.kill('SIGTERM');
          }),
      ),
    );
  }
}
