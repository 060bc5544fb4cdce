import { paths, reachHome } from '../paths.js';
import { done, warn } from '../output.js';
import { alive, readState } from '../local/stack.js';
import { httpOk, waitFor } from '../local/net.js';

/**
 * `reach restart <component>`: stops one process of the running stack; its supervisor starts it
 * again at once from the current build (handy after `pnpm build` during development).
 */
export async function restart(name: string | undefined): Promise<number> {
  const state = readState(paths(reachHome()));
  if (!state || !alive(state.supervisorPid)) {
    warn('the local stack is not running');
    return 1;
  }
  const proc = state.processes.find((p) => p.name === name);
  if (!proc?.pid) {
    warn(`no component ${name ?? '(none given)'}; components: ${state.processes.map((p) => p.name).join(', ')}`);
    return 2;
  }
  process.kill(proc.pid, 'SIGTERM');
  await waitFor(`${name} to stop`, async () => !alive(proc.pid), 60_000);
  const url = state.endpoints[proc.name];
  if (url?.startsWith('http')) await waitFor(`${name} to be ready again`, () => httpOk(`${url}/readyz`).then((ok) => ok || httpOk(`${url}/subjects`)), 60_000);
  done(`${name} restarted`);
  return 0;
}
