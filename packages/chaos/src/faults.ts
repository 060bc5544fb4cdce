import type { FaultName } from './options.js';
import type { RawAgents } from './raw-agents.js';
import type { SdkAgents } from './sdk-agents.js';
import { killPostgres, killRedis, killStackProcess, waitRestarted } from './stack-control.js';

/** What a fault did: when it struck, when what it broke was back, and a word on it. */
export interface Injected {
  readonly at: number;
  readonly healedAt: number;
  readonly detail: string;
}

export interface FaultTargets {
  sdk: SdkAgents;
  raw: RawAgents;
}

/** How long Redis and PostgreSQL stay down before they are started again. */
const SERVER_DOWN_MS = 3_000;
/** How long the slow agent stops reading. */
const STALL_MS = 8_000;

async function killService(name: string): Promise<Injected> {
  const { pid, at } = await killStackProcess(name);
  await waitRestarted(name, pid);
  return { at, healedAt: Date.now(), detail: `kill -9 ${name} (pid ${pid}); the supervisor restarted it` };
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
    case 'kill-kafka': {
      const r = await killService('kafka');
      return { ...r, detail: `${r.detail} (one broker: every stage waits for it)` };
    }
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
