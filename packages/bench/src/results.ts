import type { SingleResult } from './single.js';
/**
 * The shapes of what a bench run measures: printed as tables (report.ts), written as JSON
 * (`--json`, `--save-baseline`) and read back to compare runs (compare.ts). Plain data only,
 * so a baseline written by one build is read by the next.
 */

export interface LatencySummary {
  count: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

/** One component's CPU over a loaded window, once its idle cost is taken off. */
export interface ComponentCost {
  /** µs of CPU per delivered message. */
  usPerMsg: number;
  /** Of the whole stack's loaded CPU (0..1). */
  share: number;
  /** % of one core while loaded (idle cost included), and while idle just before. */
  loadedPctCore: number;
  idlePctCore: number;
}

export interface CpuCost {
  windowS: number;
  /** Messages the window's CPU is divided by (delivered in the window). */
  messages: number;
  components: Record<string, ComponentCost>;
  totalUsPerMsg: number;
  /** The stack's loaded CPU as a share of the machine (all cores). */
  stackMachineShare: number;
  /** The bench process itself (agents, producers, the DELIVERED tap), apart from the stack. */
  bench: { usPerMsg: number; machineShare: number };
  /** Components a process of which restarted during the window: their figures are suspect. */
  churned: string[];
  /**
   * Components busier in the idle window than in the loaded one: something else was running
   * (a previous run's leftovers, a background task), so their per-message figure is too low.
   */
  noisyIdle: string[];
}

/** What the stack did per delivered message over a measured window (work-count.ts). */
export interface WorkCost {
  messages: number;
  /** Kafka records produced, per topic. */
  produced: Record<string, number>;
  /** Kafka records consumed, per committing consumer group. */
  consumed: Record<string, number>;
  /** Kafka requests, per service and API. */
  requests: Record<string, Record<string, number>>;
  /** Redis commands, by command (those run inside scripts included). */
  redis: Record<string, number>;
  /** PostgreSQL statements, per service. */
  pgStatements: Record<string, number>;
  /** The database's transactions (xacts) and rows inserted, updated, deleted. */
  pg: Record<string, number>;
  /** Log lines, per service log. */
  logLines: Record<string, number>;
}

export interface LagReading {
  /** Sum over the pipeline's consumer groups of end offset − committed offset. */
  total: number;
  byGroup: Record<string, number>;
}

export interface StepResult {
  /** A step of the sweep, or one of the two extra rates the knee ratio is measured at. */
  role: 'sweep' | 'knee';
  rate: number;
  durationS: number;
  /** Sent in the measured window (after the warm-up). */
  offered: number;
  /** Distinct messages an agent received. */
  received: number;
  /** Deliveries beyond the first of a message (the same message reaching agents again). */
  redeliveries: number;
  /** Messages whose DELIVERED status event was seen. */
  delivered: number;
  /** Seconds waited after the last send for stragglers (bounded). */
  drainS: number;
  /** Fewer than 90 % delivered within the bounded wait: the pipeline did not keep up at all. */
  collapsed: boolean;
  lag: {
    /** When the last message of the window was sent. */
    atEnd: LagReading;
    /** Growth over the window (least squares over ~1 s samples), records per second. */
    growthPerS: number;
    /** After the straggler wait. */
    afterDrain: number;
  };
  receive: LatencySummary;
  deliveredLatency: LatencySummary;
  /** The raw kafkajs produce→consume loop at the same rate, measured right after. */
  raw: LatencySummary & { sent: number; received: number; durationS: number };
  cpu: CpuCost;
  /** Absent in reports written before it was counted. */
  work?: WorkCost;
  /** VmRSS per component at the end of the window, MiB. */
  rssMiB: Record<string, number>;
  /** Processes per component at the same moment (instances, PostgreSQL backends). */
  processes: Record<string, number>;
  verdict: { sustainable: boolean; reasons: string[] };
}

export interface HopsResult {
  rate: number;
  sampled: number;
  /** Messages whose timeline had every state needed. */
  complete: number;
  hops: Array<{ hop: string; count: number; p50: number; p99: number }>;
}

export interface SweepResult {
  rates: number[];
  steps: StepResult[];
  /** Highest swept rate with DELIVERED p99 < 100 ms, everything delivered and flat lag. */
  maxSustainableRate: number | null;
  knee: { rate60: number; rate10: number; p99At60: number; p99At10: number; ratio: number } | null;
  hops: HopsResult | null;
  /** Rates not run because an earlier step collapsed. */
  skipped: number[];
}

export interface IdleResult {
  seconds: number;
  processes: Array<{ pid: number; component: string; label: string; pctCore: number }>;
  components: Record<string, number>;
  totalPctCore: number;
  /** Components restarted during the window, and components not running at its start or end. */
  churned: string[];
  absent: string[];
}

export interface IdleAgentsResult {
  agents: number;
  seconds: number;
  /** % of one core per component: before the agents connected, with them, and the difference. */
  before: Record<string, number>;
  with: Record<string, number>;
  added: Record<string, number>;
  /** Dispatcher + registry: what holding idle agents costs the services that hold them. */
  addedDispatcherRegistry: number;
  addedTotal: number;
  connectS: number;
  churned: string[];
  absent: string[];
}

export interface TrackerCeilingResult {
  messages: number;
  events: number;
  /** Producing the pre-encoded events. */
  produceS: number;
  /** From the first send until the tracker had written every event (or the timeout: see complete). */
  seconds: number;
  complete: boolean;
  /** The headline: message rows (DELIVERED) and timeline rows per second; see basis. */
  rowsPerS: number;
  eventsPerS: number;
  /** saturated: while the tracker had a backlog (its ceiling); overall: from the first send (a lower bound). */
  basis: 'saturated' | 'overall';
  saturatedS: number;
  overall: { rowsPerS: number; eventsPerS: number };
  /** Most events acknowledged by the broker and not yet written, at one reading. */
  peakBacklog: number;
  /** The tracker was never behind for a second: the producer was the limit, the figures a lower bound. */
  producerLimited: boolean;
  /** Where the tracker's progress was read: its own counters, or its consumer group's commits. */
  measuredBy: 'metrics' | 'commits';
  trackerPctCore: number;
  postgresPctCore: number;
  /** Sampled messages read back through the message API and found DELIVERED. */
  verified: { sampled: number; delivered: number };
}

/** The `--json` document: every section the run measured. */
export interface BenchReport {
  kind: 'reach-bench';
  version: 1;
  at: string;
  host: { cores: number; node: string };
  /** The options each section was measured with, by section. */
  settings: Record<string, Record<string, unknown>>;
  sweep?: SweepResult;
  idle?: IdleResult;
  idleAgents?: IdleAgentsResult;
  single?: SingleResult;
  tracker?: TrackerCeilingResult;
}
