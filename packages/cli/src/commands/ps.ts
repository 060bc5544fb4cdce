import { paths, reachHome } from '../paths.js';
import { table } from '../output.js';
import { alive, readState } from '../local/stack.js';
import { redactUrl } from '@reach/core';
import { httpOk, portOpen } from '../local/net.js';
import { cliTls } from '../transport.js';

/** Ready: an HTTP component answers /readyz (the schema registry /subjects); a Kafka node accepts connections. */
async function componentReady(endpoint: string | undefined, pid: number | undefined): Promise<boolean> {
  if (endpoint?.startsWith('http')) {
    const tls = cliTls(process.env);
    return httpOk(`${endpoint}/readyz`, tls).then((ok) => ok || httpOk(`${endpoint}/subjects`, tls));
  }
  const m = endpoint && !endpoint.includes(',') ? /^([^:]+):(\d+)$/.exec(endpoint) : null;
  if (m) return alive(pid) && (await portOpen(m[1]!, Number(m[2])));
  return alive(pid);
}

/** An endpoint as `reach ps` shows it: a URL's password (a registry's basic auth) hidden. */
function shownEndpoint(url: string | undefined): string {
  if (!url) return '';
  return /:\/\/[^/]*@/.test(url) ? redactUrl(url) : url;
}

/** `reach ps`: the processes of the stack of REACH_HOME and their readiness; exit 0 only when all are ready. */
export async function ps(args: { json: boolean }): Promise<number> {
  const home = reachHome();
  const state = readState(paths(home));
  if (!state || !alive(state.supervisorPid)) {
    if (args.json) process.stdout.write(JSON.stringify({ running: false, home }) + '\n');
    else process.stdout.write(`the local stack of ${home} is not running (\`reach up\` starts it)\n`);
    return 1;
  }
  const rows = await Promise.all(
    state.processes.map(async (proc) => {
      const url = state.endpoints[proc.name];
      const ready = await componentReady(url, proc.pid);
      return { name: proc.name, pid: proc.pid, alive: alive(proc.pid), ready, restarts: proc.restarts ?? 0, endpoint: shownEndpoint(url) };
    }),
  );
  const allReady = state.ready && rows.every((r) => r.alive && r.ready);
  if (args.json) {
    process.stdout.write(
      JSON.stringify(
        { running: true, ready: allReady, home, options: state.options, replication: state.replication, kafkaNodes: state.kafkaNodes, processes: rows },
        null,
        2,
      ) + '\n',
    );
  } else process.stdout.write(table(rows));
  return allReady ? 0 : 1;
}
