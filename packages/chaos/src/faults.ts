import type { FaultName } from './options.js';
import type { RawAgents } from './raw-agents.js';
import type { SdkAgents } from './sdk-agents.js';
import { TOPICS } from '@reach/kafka';
import { kafkaNodes, killPostgres, killRedis, killStackProcess, partitionLeaders, waitRestarted } from './stack-control.js';

/** What a fault did: when it struck, when what it broke was back, and a word on it. */
export interface Injected {
  readonly at: number;
  readonly healedAt: number;
  readonly detail: string;
  /** The fault does not apply to this stack (e.g. a partition leader with one broker). */
  readonly skipped?: true;
  /** A killed service: its name and the pid it was restarted under. */
  readonly restarted?: { readonly service: string; readonly pid: number };
}

export interface FaultTargets {
  sdk: SdkAgents;
  raw: RawAgents;
}

/** How long Redis and PostgreSQL stay down before they are started again. */
const SERVER_DOWN_MS = 3_000;
/** How long the slow agent stops reading. */
const STALL_MS = 8_000;
/** dispatcher-crash-loop: kills in a row, each as soon as the supervisor started it again. */
const CRASH_LOOP_KILLS = 3;

async function killService(name: string): Promise<Injected> {
  const { pid, at } = await killStackProcess(name);
  const newPid = await waitRestarted(name, pid);
  return { at, healedAt: Date.now(), detail: `kill -9 ${name} (pid ${pid}); the supervisor restarted it`, restarted: { service: name, pid: newPid } };
}

/**
 * kill -9 of the dispatcher, then of each restart as soon as it runs, CRASH_LOOP_KILLS times:
 * the supervisor's crash-loop backoff (0.1, 1, 2 s) keeps it away ~5–7 s, as a slow restart on
 * a loaded machine does (longer if it crashed less than 30 s before: the backoff goes on). Its
 * agents back off meanwhile (1, 2, 4, 8 s…) and come back seconds after it listens; the
 * deliveries they ran must not go to other agents first.
 */
async function crashLoopDispatcher(): Promise<Injected> {
  const first = await killStackProcess('dispatcher');
  let pid = first.pid;
  for (let i = 1; i < CRASH_LOOP_KILLS; i++) {
    pid = await waitRestarted('dispatcher', pid, { ready: false });
    process.kill(pid, 'SIGKILL');
  }
  const newPid = await waitRestarted('dispatcher', pid);
  return {
    at: first.at,
    healedAt: Date.now(),
    detail: `kill -9 of the dispatcher (pid ${first.pid}) and of its next ${CRASH_LOOP_KILLS - 1} restarts as soon as they ran`,
    restarted: { service: 'dispatcher', pid: newPid },
  };
}

/**
 * kill -9 of the broker that leads partition 0 of reach.pending.v1 (Kafka's replication-test
 * fault): the other two take over its partitions, with min.insync.replicas 2 nothing
 * acknowledged is lost, and the supervisor restarts it. Needs `reach up --brokers 3`; with one
 * broker it is skipped (kill-kafka is that case).
 */
async function killPartitionLeader(): Promise<Injected> {
  const nodes = await kafkaNodes();
  const at = Date.now();
  if (nodes.length < 2) return { at, healedAt: at, detail: 'skipped: one broker (run `reach up --brokers 3` for this fault)', skipped: true };
  const brokers = nodes.map((n) => n.address);
  const pending = await partitionLeaders(brokers, TOPICS.pending.name);
  const routed = await partitionLeaders(brokers, TOPICS.routed.name);
  const node = nodes.find((n) => n.id === pending[0]);
  if (!node) throw new Error(`the leader of ${TOPICS.pending.name}[0] (broker ${pending[0]}) is not a node of this stack`);
  const led = (leaders: number[]) => leaders.filter((l) => l === node.id).length;
  const r = await killService(node.name);
  return {
    ...r,
    detail: `${r.detail}: leader of ${led(pending)}/${pending.length} ${TOPICS.pending.name} and ${led(routed)}/${routed.length} ${TOPICS.routed.name} partitions`,
  };
}

export async function inject(fault: FaultName, t: FaultTargets): Promise<Injected> {
  switch (fault) {
    case 'kill-ingress':
    case 'kill-router':
    case 'kill-dispatcher':
    case 'kill-retry-scheduler':
    case 'kill-tracker':
    case 'kill-registry':
    case 'kill-dead-letter':
      return killService(fault.slice('kill-'.length));
    case 'dispatcher-crash-loop':
      return crashLoopDispatcher();
    case 'kill-kafka': {
      if ((await kafkaNodes()).length > 1) {
        const at = Date.now();
        return { at, healedAt: at, detail: 'skipped: several brokers (kill-partition-leader is the fault for a cluster)', skipped: true };
      }
      const r = await killService('kafka');
      return { ...r, detail: `${r.detail} (one broker: every stage waits for it)` };
    }
    case 'kill-partition-leader':
      return killPartitionLeader();
    case 'kill-redis': {
      const at = Date.now();
      await killRedis(SERVER_DOWN_MS);
      return { at, healedAt: Date.now(), detail: `kill -9 redis-server, started again after ${SERVER_DOWN_MS / 1000} s` };
    }
    case 'kill-postgres': {
      const at = Date.now();
      await killPostgres(SERVER_DOWN_MS);
      return { at, healedAt: Date.now(), detail: `kill -9 of the postmaster, started again after ${SERVER_DOWN_MS / 1000} s` };
    }
    case 'kill-agent-mid-handler': {
      const at = Date.now();
      const { tag, cutOff } = await t.sdk.killOneMidHandler();
      return { at, healedAt: Date.now(), detail: `kill -9 of SDK agent process ${tag} with ${cutOff} handlers running; a new one started` };
    }
    case 'slow-agent': {
      const at = Date.now();
      const id = t.raw.stall(STALL_MS);
      return { at, healedAt: at + STALL_MS, detail: id ? `${id} stopped reading its socket for ${STALL_MS / 1000} s` : 'no raw agent connected' };
    }
  }
}
