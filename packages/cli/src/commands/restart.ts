import { silentLogger } from '@reach/core';
import { createKafka } from '@reach/kafka';
import { paths, reachHome } from '../paths.js';
import { done, step, warn } from '../output.js';
import { alive, readState, type StackState } from '../local/stack.js';
import { httpOk, portOpen, waitFor } from '../local/net.js';
import { cliTls } from '../transport.js';

function readyAgain(state: StackState, name: string): () => Promise<boolean> {
  const url = state.endpoints[name];
  if (url?.startsWith('http')) {
    const tls = cliTls(process.env);
    return () => httpOk(`${url}/readyz`, tls).then((ok) => ok || httpOk(`${url}/subjects`, tls));
  }
  const m = url && !url.includes(',') ? /^([^:]+):(\d+)$/.exec(url) : null;
  if (m) return () => portOpen(m[1]!, Number(m[2]));
  return async () => true;
}

/** Every partition of the local cluster has all its replicas in sync (a rolling restart's next step may go). */
async function clusterInSync(brokers: readonly string[]): Promise<boolean> {
  const admin = createKafka({ brokers, clientId: 'reach-restart', logger: silentLogger, connectionTimeoutMs: 1000 }).admin();
  await admin.connect();
  try {
    const { topics } = await admin.fetchTopicMetadata();
    return topics.every((t) => t.partitions.every((p) => p.isr.length === p.replicas.length));
  } finally {
    await admin.disconnect();
  }
}

/**
 * `reach restart <component>`: stops one process of the stack of REACH_HOME; its supervisor
 * starts it again at once from the current build (handy after `pnpm build` during development).
 * A service with several instances (`reach up --instances N`), or `kafka` of a local cluster,
 * restarts every instance in turn, each ready again before the next stops (a Kafka node: back
 * in every partition's in-sync replicas, so the restart never drops a partition below
 * min.insync.replicas).
 */
export async function restart(name: string | undefined): Promise<number> {
  const state = readState(paths(reachHome()));
  if (!state || !alive(state.supervisorPid)) {
    warn(`the local stack of ${reachHome()} is not running`);
    return 1;
  }
  // `router` with --instances: router, router-2, …; `kafka` of a cluster: kafka-1, kafka-2, …
  const instanceOf = (proc: string) => name !== undefined && proc.startsWith(`${name}-`) && /^\d+$/.test(proc.slice(name.length + 1));
  const targets = state.processes.filter((p) => p.name === name || instanceOf(p.name));
  if (targets.length === 0 || targets.some((t) => !t.pid)) {
    warn(`no component ${name ?? '(none given)'}; components: ${state.processes.map((p) => p.name).join(', ')}`);
    return 2;
  }
  for (const proc of targets) {
    if (targets.length > 1) step(`restarting ${proc.name}`);
    process.kill(proc.pid!, 'SIGTERM');
    await waitFor(`${proc.name} to stop`, async () => !alive(proc.pid), 60_000);
    // The supervisor starts it under a new pid: wait for that one to be ready.
    await waitFor(
      `${proc.name} to be ready again`,
      async () => {
        const now = readState(paths(reachHome()))?.processes.find((p) => p.name === proc.name);
        return !!now?.pid && now.pid !== proc.pid && alive(now.pid) && (await readyAgain(state, proc.name)());
      },
      90_000,
    );
    const nodes = state.kafkaNodes ?? [];
    if (nodes.length > 1 && nodes.some((n) => n.name === proc.name)) {
      await waitFor(`${proc.name} back in sync`, () => clusterInSync(nodes.map((n) => n.address)), 120_000, 500);
    }
  }
  done(`${targets.length > 1 ? targets.map((t) => t.name).join(', ') : name} restarted`);
  return 0;
}
