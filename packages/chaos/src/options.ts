/**
 * What a chaos run does. Two presets: `short` (npm test and CI: every fault once at a modest
 * rate, ≤ 3 minutes) and `long` (500 msg/s offered over HTTP, several cycles of every fault;
 * its table goes in docs/faults.md). Both submit over HTTP, whose careful client (at most 256 in
 * flight) slows down with the stack; `--via kafka` offers the full rate however the stack copes.
 */
export const FAULTS = [
  'kill-ingress',
  'kill-router',
  'kill-dispatcher',
  'dispatcher-crash-loop',
  'kill-retry-scheduler',
  'kill-tracker',
  'kill-registry',
  'kill-dead-letter',
  'kill-kafka',
  'kill-partition-leader',
  'kill-redis',
  'kill-postgres',
  'kill-agent-mid-handler',
  'slow-agent',
] as const;
export type FaultName = (typeof FAULTS)[number];

export interface ChaosOptions {
  /** Messages per second submitted, each with its own idempotency key. */
  rate: number;
  /**
   * How the load submits: `http` (POST /v1/messages, a careful client retrying what may pass) or
   * `kafka` (reach.ingress.v1 with acks=-1, batched: cheap enough to offer 500 msg/s on a 2-core
   * machine that also runs the stack and the agents).
   */
  via: 'http' | 'kafka';
  /** Seconds of steady load before the first fault and between faults (recovery window). */
  phaseS: number;
  /** How many times the fault list is run through. */
  cycles: number;
  faults: readonly FaultName[];
  /** Processes of SDK agents (each killable with SIGKILL) and agents in each. */
  agentProcesses: number;
  agentsPerProcess: number;
  /** Raw WebSocket agents (ack at once) in the chaos process itself. */
  rawAgents: number;
  /** How long an SDK handler works (ms): deliveries are in flight when a fault strikes. */
  handlerMs: number;
  /** Longest wait after the last fault for every accepted message to be terminal. */
  drainS: number;
}

/**
 * The faults npm test runs: all but dispatcher-crash-loop, whose kills would prolong the
 * supervisor's crash-loop backoff for the kill-dispatcher next to it. (kill -9 of Redis is
 * survived since `reach up` turns Redis's append-only file on: before, the machine's Redis kept nothing, and a kill lost the
 * in-flight deliveries and the acks it held.)
 */
export const CI_FAULTS: readonly FaultName[] = FAULTS.filter((f) => f !== 'dispatcher-crash-loop');

export const SHORT: ChaosOptions = {
  rate: 40,
  via: 'http',
  phaseS: 6,
  cycles: 1,
  faults: CI_FAULTS,
  agentProcesses: 2,
  agentsPerProcess: 2,
  rawAgents: 2,
  handlerMs: 40,
  drainS: 75,
};

export const LONG: ChaosOptions = {
  rate: 500,
  via: 'http',
  phaseS: 15,
  cycles: 2,
  faults: FAULTS,
  agentProcesses: 3,
  agentsPerProcess: 3,
  rawAgents: 4,
  handlerMs: 20,
  drainS: 120,
};
