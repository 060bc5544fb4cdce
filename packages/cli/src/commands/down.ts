import { paths, reachHome } from '../paths.js';
import { done, step, warn } from '../output.js';
import { alive, clearState, readState } from '../local/stack.js';

async function waitGone(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
  return true;
}

/** `reach down`: asks the supervisor to stop everything in reverse order; cleans up strays. */
export async function down(): Promise<number> {
  const p = paths(reachHome());
  const state = readState(p);
  if (!state) {
    done('nothing is running');
    return 0;
  }
  if (alive(state.supervisorPid)) {
    step(`stopping the stack (supervisor pid ${state.supervisorPid})`);
    process.kill(state.supervisorPid, 'SIGTERM');
    if (!(await waitGone(state.supervisorPid, 120_000))) warn('the supervisor did not stop in 2 minutes; killing what is left');
  }
  for (const proc of [...state.processes].reverse()) {
    if (proc.pid && alive(proc.pid)) {
      warn(`${proc.name} (pid ${proc.pid}) is still running; stopping it`);
      process.kill(proc.pid, 'SIGTERM');
      if (!(await waitGone(proc.pid, 30_000))) process.kill(proc.pid, 'SIGKILL');
    }
  }
  clearState(p);
  done('stopped');
  return 0;
}
