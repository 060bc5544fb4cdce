/** What a soak run does (`pnpm soak --minutes N --rate R`; main.ts parses the flags). */
export interface SoakOptions {
  minutes: number;
  /** Messages per second offered over HTTP. */
  rate: number;
  /** Share of handler runs that throw a plain Error (transient, retried). */
  failRate: number;
  /** Processes of stable SDK agents and agents in each. */
  agentProcesses: number;
  agentsPerProcess: number;
  /** Every this many seconds a transient agent process starts, or the running one stops. */
  churnS: number;
  /** Seconds between samples (a minute; shorter for the test's short run). */
  sampleS: number;
  /** Seconds of the start during which RSS may still grow (caches filling, JIT). */
  warmupS: number;
  /** A message is checked for a terminal state this long after it was accepted. */
  settleS: number;
  /** After the load stops, how long to wait at most for the last messages to end. */
  drainS: number;
}

export const DEFAULTS: SoakOptions = {
  minutes: 60,
  rate: 200,
  failRate: 0.03,
  agentProcesses: 2,
  agentsPerProcess: 2,
  churnS: 60,
  sampleS: 60,
  warmupS: 600,
  settleS: 60,
  drainS: 90,
};
