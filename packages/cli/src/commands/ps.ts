import { paths, reachHome } from '../paths.js';
import { table } from '../output.js';
import { alive, readState } from '../local/stack.js';
import { httpOk } from '../local/net.js';

/** `reach ps`: the local stack's processes and readiness; exit 0 only when all are ready. */
export async function ps(args: { json: boolean }): Promise<number> {
  const state = readState(paths(reachHome()));
  if (!state || !alive(state.supervisorPid)) {
    if (args.json) process.stdout.write(JSON.stringify({ running: false }) + '\n');
    else process.stdout.write('the local stack is not running (`reach up` starts it)\n');
    return 1;
  }
  const rows = await Promise.all(
    state.processes.map(async (proc) => {
      const url = state.endpoints[proc.name];
      const ready = url?.startsWith('http') ? await httpOk(`${url}/readyz`).then((ok) => ok || httpOk(`${url}/subjects`)) : alive(proc.pid);
      return { name: proc.name, pid: proc.pid, alive: alive(proc.pid), ready, endpoint: url ?? '' };
    }),
  );
  const allReady = state.ready && rows.every((r) => r.alive && r.ready);
  if (args.json) process.stdout.write(JSON.stringify({ running: true, ready: allReady, processes: rows }, null, 2) + '\n');
  else process.stdout.write(table(rows));
  return allReady ? 0 : 1;
}
