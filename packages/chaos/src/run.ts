import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { localStack, testClient } from '@reach/sdk/testing';
import { inject, type Injected } from './faults.js';
import { Ledger } from './ledger.js';
import { KafkaLoad } from './kafka-load.js';
import { Load, type SteadyLoad } from './load.js';
import type { ChaosOptions, FaultName } from './options.js';
import { RawAgents } from './raw-agents.js';
import { SdkAgents } from './sdk-agents.js';
import { sleep } from './stack-control.js';
import { firstHandledBy, statuses, verify, type Verdict } from './verify.js';

export interface FaultResult {
  fault: FaultName;
  detail: string;
  /** Seconds from the start of the load. */
  atS: number;
  /** How long the fault lasted (a restart, a server down and up). */
  healedAfterMs: number;
  /**
   * Fault → the messages submitted in the second after it have all reached an agent: the
   * stalled stage flowing again (null: not within the run).
   */
  recoveredAfterMs: number | null;
  /**
   * Kill → the restarted process handled its first record (its first status event): the stage
   * flowing again, its backlog not included (what takeover time measures). Null: no such event (a service
   * that writes none, or not within the run); undefined for faults that are no service kill.
   */
  firstHandledAfterMs?: number | null;
  /** The longest send → first delivery among messages submitted in its window. */
  /** Worst send → agent wait of the messages sent in this fault's window that reached an agent. */
  maxWaitMs: number;
  /** Messages sent in this fault's window that never reached an agent (they ended DEAD). */
  neverDelivered: number;
}

export interface ChaosReport {
  kind: 'reach-chaos';
  options: ChaosOptions;
  seconds: number;
  faults: FaultResult[];
  verdict: Verdict;
  /** Every must-be-zero count is zero. */
  ok: boolean;
}

const TERMINAL = new Set(['DELIVERED', 'REJECTED', 'DEAD']);
/** The messages whose arrival says a stage flows again: those submitted this long after a fault. */
const RECOVERY_SPAN_MS = 1_000;
/** The restarted stage's first record may be one sent before the kill (queued behind it). */
const FIRST_HANDLED_LOOKBACK_MS = 30_000;

/**
 * One chaos run against the running local stack: SDK agents (in killable processes) and raw
 * WebSocket agents on a fresh capability, steady load over HTTP, the faults one after the other
 * with a recovery window under load after each, then a drain until every accepted message is
 * terminal (bounded), then the verdict.
 */
export async function runChaos(o: ChaosOptions, progress: (line: string) => void = () => undefined): Promise<ChaosReport> {
  const stack = localStack();
  if (!stack.adminToken) throw new Error('no admin token: set REACH_ADMIN_TOKEN or run `reach up` first');
  const run = randomBytes(3).toString('hex');
  const capability = `chaos_${run}`;
  const ledger = new Ledger();
  const db = new pg.Pool({ connectionString: process.env.REACH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/reach', max: 2 });
  db.on('error', () => undefined); // PostgreSQL is one of the things killed
  const sdk = new SdkAgents(capability, o.agentsPerProcess, o.handlerMs, ledger);
  const endpoints = { registryUrl: stack.registryUrl, ingressUrl: stack.ingressUrl, wsUrl: stack.dispatcherUrl, adminToken: stack.adminToken };
  const raw = new RawAgents(endpoints, capability, ledger);
  const load: SteadyLoad =
    o.via === 'kafka'
      ? new KafkaLoad(
          {
            ...endpoints,
            brokers: (process.env.REACH_KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
            schemaRegistryUrl: stack.schemaRegistryUrl,
          },
          capability,
          run,
          ledger,
        )
      : new Load(testClient(), capability, run, ledger);
  const injected: Array<{ fault: FaultName; inj: Injected }> = [];
  const started = Date.now();
  try {
    progress(`chaos ${run}: ${o.agentProcesses}×${o.agentsPerProcess} SDK agents, ${o.rawAgents} raw agents, ${o.rate} msg/s over ${o.via}`);
    await sdk.start(o.agentProcesses);
    await raw.start(o.rawAgents, run);
    await sleep(1_000); // the router's views see the raw agents
    await load.open(o.rate);
    load.start(o.rate);
    await sleep(o.phaseS * 1000);
    for (let cycle = 1; cycle <= o.cycles; cycle++) {
      for (const fault of o.faults) {
        progress(`  cycle ${cycle}: ${fault}`);
        const inj = await inject(fault, { sdk, raw });
        if (inj.skipped) {
          progress(`    ${inj.detail}`);
          continue;
        }
        injected.push({ fault, inj });
        await sleep(o.phaseS * 1000);
      }
    }
    progress('  load stopped; draining');
    await load.stop();
    const loadEnded = Date.now();
    const ids = [...ledger.accepted.keys()];
    while (Date.now() - loadEnded < o.drainS * 1000) {
      const s = await statuses(db, ids).catch(() => new Map<string, string>());
      const open = ids.filter((id) => !TERMINAL.has(s.get(id) ?? ''));
      if (open.length === 0) break;
      await sleep(2_000);
    }
    const verdict = await verify(db, ledger);
    const now = Date.now();
    const faults = await Promise.all(
      injected.map(async ({ fault, inj }, i) => {
        const next = injected[i + 1]?.inj.at ?? loadEnded;
        const flowing = ledger.flowingAgainAt(inj.at, RECOVERY_SPAN_MS);
        const first = inj.restarted
          ? await firstHandledBy(db, ledger.sentBetween(inj.at - FIRST_HANDLED_LOOKBACK_MS, next), inj.restarted.service, inj.restarted.pid, inj.at)
          : undefined;
        return {
          fault,
          detail: inj.detail,
          atS: (inj.at - started) / 1000,
          healedAfterMs: inj.healedAt - inj.at,
          recoveredAfterMs: flowing === undefined ? null : flowing - inj.at,
          ...(inj.restarted ? { firstHandledAfterMs: first === undefined ? null : first - inj.at } : {}),
          ...ledger.maxWait(inj.at, next),
        };
      }),
    );
    const ok = [verdict.lost, verdict.duplicatedKeys, verdict.notTerminal, verdict.deadThoughAcked, verdict.illegalTransitions].every((n) => n === 0);
    return { kind: 'reach-chaos', options: o, seconds: (now - started) / 1000, faults, verdict, ok };
  } finally {
    await load.stop().catch(() => undefined);
    await Promise.all([sdk.stop(), raw.stop()]).catch(() => undefined);
    await db.end().catch(() => undefined);
  }
}
