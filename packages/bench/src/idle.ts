import { randomBytes } from 'node:crypto';
import type WebSocket from 'ws';
import { pctCoreByComponent } from './cpu-cost.js';
import { absentComponents, byComponentOrder, cpuBetween, cpuSnapshot, type CpuUse, type ProcScope } from './proc-cpu.js';
import type { IdleAgentsResult, IdleResult } from './results.js';
import { deregister, forEachLimit, heartbeats, openAgentSocket, register, type Registered, type StackEndpoints } from './stack.js';

/**
 * What the stack costs when nothing happens: `--idle` (no traffic at all) and `--idle-agents N`
 * (N agents connected and doing only what the protocol asks: pongs and heartbeats). Both are
 * CPU over a window read from /proc, as % of one core.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const REGISTRATION_SETTLE_MS = 5000;

async function window(scope: ProcScope, seconds: number): Promise<CpuUse & { absent: string[] }> {
  const before = cpuSnapshot(scope);
  await sleep(seconds * 1000);
  const after = cpuSnapshot(scope);
  return { ...cpuBetween(before, after), absent: [...new Set([...absentComponents(before), ...absentComponents(after)])] };
}

export async function measureIdle(scope: ProcScope, seconds: number): Promise<IdleResult> {
  const use = await window(scope, seconds);
  const processes = use.byProcess
    .map((p) => ({ pid: p.pid, component: p.component, label: p.label, pctCore: (p.cpuS / use.seconds) * 100 }))
    .sort((a, b) => byComponentOrder(a.component, b.component) || a.pid - b.pid);
  const components = pctCoreByComponent(use);
  return {
    seconds: use.seconds,
    processes,
    components,
    totalPctCore: Object.values(components).reduce((a, b) => a + b, 0),
    churned: [...use.churned].sort(byComponentOrder),
    absent: use.absent,
  };
}

/**
 * N idle agents: registered (with a long ttl_s, so heartbeats — every ttl_s/2 — stay rare),
 * connected with hello, answering pings. The window before they connect is the baseline; the
 * window after (once all are connected) is compared with it. They are deregistered after.
 */
export async function measureIdleAgents(
  s: StackEndpoints,
  o: { agents: number; seconds: number; ttlS: number; scope: ProcScope; progress: (line: string) => void },
): Promise<IdleAgentsResult> {
  const run = randomBytes(3).toString('hex');
  const agents: Registered[] = [];
  const sockets: WebSocket[] = [];
  let stopHeartbeats = () => undefined as void;
  try {
    o.progress(`  registering ${o.agents} agents`);
    await forEachLimit(
      Array.from({ length: o.agents }, (_, i) => i),
      8,
      async (i) => {
        agents.push(
          await register(s, {
            agent_id: `bench.idle.${run}.${i}`,
            agent_type: 'bench',
            endpoints: { ws: s.wsUrl },
            capabilities: [{ name: `bench_idle_${run}`, mode: 'handle' }],
            metadata: { max_concurrency: 1, domain: 'default' },
            ttl_s: o.ttlS,
          }),
        );
      },
    );
    // Every registration is a record on reach.agents.v1 that each service's view consumes: let
    // that settle, or the baseline window would hold it.
    await sleep(REGISTRATION_SETTLE_MS);
    o.progress(`  baseline window ${o.seconds} s (registered, not connected)`);
    const before = await window(o.scope, o.seconds);
    const connectStarted = performance.now();
    await forEachLimit(agents, 16, async (a) => {
      sockets.push(await openAgentSocket(s, a, (_d, answer) => answer()));
    });
    const connectS = (performance.now() - connectStarted) / 1000;
    stopHeartbeats = heartbeats(s, agents);
    o.progress(`  ${sockets.length} connected in ${connectS.toFixed(1)} s; window ${o.seconds} s with them`);
    await sleep(2000); // presence records and views settle before the window
    const withAgents = await window(o.scope, o.seconds);
    const b = pctCoreByComponent(before);
    const w = pctCoreByComponent(withAgents);
    const added: Record<string, number> = {};
    for (const c of new Set([...Object.keys(b), ...Object.keys(w)])) added[c] = (w[c] ?? 0) - (b[c] ?? 0);
    const sum = (r: Record<string, number>) => Object.values(r).reduce((x, y) => x + y, 0);
    return {
      agents: sockets.length,
      seconds: o.seconds,
      before: b,
      with: w,
      added,
      addedDispatcherRegistry: (added.dispatcher ?? 0) + (added.registry ?? 0),
      addedTotal: sum(added),
      connectS,
      churned: [...new Set([...before.churned, ...withAgents.churned])].sort(byComponentOrder),
      absent: [...new Set([...before.absent, ...withAgents.absent])],
    };
  } finally {
    stopHeartbeats();
    for (const ws of sockets) ws.close();
    o.progress(`  deregistering ${agents.length} agents`);
    await deregister(
      s,
      agents.map((a) => a.agent_id),
    );
  }
}
