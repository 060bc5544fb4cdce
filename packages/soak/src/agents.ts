import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const AGENT_PROCESS = fileURLToPath(new URL('./agent-process.js', import.meta.url));
const READY_TIMEOUT_MS = 60_000;

type FromAgent = { t: 'ready'; agents: string[] } | { t: 'counts'; handled: number; failed: number };

export interface AgentGroup {
  readonly child: ChildProcess;
  readonly transient: boolean;
  agents: string[];
  handled: number;
  failed: number;
}

/**
 * The soak's SDK agents: `stable` processes that run from start to end, and transient ones that
 * come and go (started and stopped gracefully, in turn). Each handler fails `failRate` of its
 * messages with a plain Error; every agent is healthy in the circuit's sense (failRate is far
 * below REACH_CIRCUIT_ERROR_RATE).
 */
export class SoakAgents {
  readonly groups: AgentGroup[] = [];
  /** Agents that have stopped (transient ones), with their counts kept. */
  readonly gone: AgentGroup[] = [];

  constructor(
    private readonly capability: string,
    private readonly failRate: number,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  start(agents: number, transient: boolean): Promise<AgentGroup> {
    const child = fork(AGENT_PROCESS, [this.capability, String(agents), String(this.failRate)], {
      env: this.env,
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    const g: AgentGroup = { child, transient, agents: [], handled: 0, failed: 0 };
    this.groups.push(g);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('an agent process was not ready within 60 s')), READY_TIMEOUT_MS);
      child.once('exit', (code) => {
        clearTimeout(timer);
        this.groups.splice(this.groups.indexOf(g), 1);
        this.gone.push(g);
        reject(new Error(`agent process exited (${code}) before it was ready`));
      });
      child.on('message', (m: FromAgent) => {
        if (m.t === 'ready') {
          g.agents = m.agents;
          child.removeAllListeners('exit');
          child.once('exit', () => {
            const i = this.groups.indexOf(g);
            if (i >= 0) this.groups.splice(i, 1);
            this.gone.push(g);
          });
          clearTimeout(timer);
          resolve(g);
        } else {
          g.handled = m.handled;
          g.failed = m.failed;
        }
      });
    });
  }

  /** Stops one group gracefully (SIGTERM: the SDK hands back queued work and deregisters). */
  async stop(g: AgentGroup): Promise<void> {
    if (g.child.exitCode !== null || g.child.signalCode !== null) return;
    const exited = new Promise<void>((r) => g.child.once('exit', () => r()));
    const kill = setTimeout(() => g.child.kill('SIGKILL'), 20_000);
    g.child.kill('SIGTERM');
    await exited;
    clearTimeout(kill);
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.groups].map((g) => this.stop(g)));
  }

  /** Every agent id ever started, with whether it was transient. */
  all(): Array<{ id: string; transient: boolean }> {
    return [...this.groups, ...this.gone].flatMap((g) => g.agents.map((id) => ({ id, transient: g.transient })));
  }

  counts(): { handled: number; failed: number } {
    return [...this.groups, ...this.gone].reduce((a, g) => ({ handled: a.handled + g.handled, failed: a.failed + g.failed }), { handled: 0, failed: 0 });
  }

  /** Pids of the running agent processes. */
  pids(): number[] {
    return this.groups.map((g) => g.child.pid!).filter(Boolean);
  }
}
