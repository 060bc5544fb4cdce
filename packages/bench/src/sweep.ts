import type { ConsumerLag } from './consumer-lag.js';
import { cpuCost } from './cpu-cost.js';
import { measureHops } from './hops.js';
import type { PipelineRig } from './pipeline.js';
import { cpuBetween, cpuSnapshot, memoryByComponent, type ProcScope } from './proc-cpu.js';
import type { RawLoop } from './raw.js';
import type { HopsResult, StepResult, SweepResult } from './results.js';
import type { StackEndpoints } from './stack.js';
import { workCost, workSnapshot, type WorkSources } from './work-count.js';
import { collapsed, kneeRates, kneeRatio, lagGrowthPerS, maxSustainableRate, nearestRate, verdict } from './verdict.js';

/**
 * The sweep: one step per rate, each measured the same way, on one rig (agents, producers,
 * tap and raw loop set up once, then a few seconds of unmeasured traffic):
 *
 *   settle   wait (bounded) until the stages stopped draining a previous step's backlog
 *   idle     CPU of every stack process with no traffic (its cost is taken off the loaded figures)
 *   warm-up  traffic at the rate, not measured
 *   window   traffic at the rate, measured: CPU, lag every second, every message tracked
 *   drain    bounded wait for the window's stragglers (still inside the CPU window)
 *   raw      the raw kafkajs loop at the same rate, right after
 *
 * Then the max sustainable rate, and two more steps at 60 % and 10 % of it for the knee ratio.
 */
export interface SweepSettings {
  rates: number[];
  durationS: number;
  warmupS: number;
  /** Idle CPU window before each loaded one. */
  cpuIdleS: number;
  rawS: number;
  /** Measure the knee ratio (60 % and 10 % of the max) after the sweep. */
  knee: boolean;
  /** Messages whose timelines give the per-hop breakdown (at the rate nearest 1,000 msg/s); 0 = none. */
  hopSamples: number;
  /** Run the higher rates even after a step collapsed. */
  keepGoing: boolean;
  cores: number;
}

export interface SweepDeps {
  rig: PipelineRig;
  raw: RawLoop;
  lag: ConsumerLag;
  endpoints: StackEndpoints;
  /** Which processes are the measured stack. */
  scope: ProcScope;
  /** Where the work per message is counted (Kafka, Redis, PostgreSQL, logs); unset: not counted. */
  work?: WorkSources;
  progress: (line: string) => void;
}

const SETTLE_MAX_MS = 30_000;
const FINAL_SETTLE_MS = 60_000;
const RUN_WARMUP_MS = 3000;
const RUN_WARMUP_RATE = 200;
const LAG_EVERY_MS = 1000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Reads the lag every second until stopped; readings never overlap. */
function sampleLag(lag: ConsumerLag): { stop: () => Promise<Array<{ atMs: number; lag: number }>> } {
  const samples: Array<{ atMs: number; lag: number }> = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      const r = await lag.read().catch(() => undefined);
      if (r) samples.push({ atMs: started, lag: r.total });
      await sleep(Math.max(0, LAG_EVERY_MS - (performance.now() - started)));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return samples;
    },
  };
}

async function runStep(
  d: SweepDeps,
  s: SweepSettings,
  rate: number,
  role: StepResult['role'],
  hopSamples: number,
): Promise<{ step: StepResult; hops?: HopsResult }> {
  const say = (what: string) => d.progress(`  ${role === 'knee' ? 'knee ' : ''}${rate} msg/s: ${what}`);
  await d.lag.discover();
  const settle = await d.lag.settle(SETTLE_MAX_MS);
  if (!settle.settled) say(`still draining after ${Math.round(settle.waitedS)} s (lag ${settle.lag.total}); measuring anyway`);

  say(`idle CPU ${s.cpuIdleS} s`);
  const idle0 = cpuSnapshot(d.scope);
  await sleep(s.cpuIdleS * 1000);
  const idle = cpuBetween(idle0, cpuSnapshot(d.scope));

  d.rig.startStep();
  say(`warm-up ${s.warmupS} s, then ${s.durationS} s measured`);
  await d.rig.load(rate, s.warmupS * 1000, false);
  const work0 = d.work ? await workSnapshot(d.work) : undefined;
  const cpu0 = cpuSnapshot(d.scope);
  const bench0 = process.cpuUsage();
  const delivered0 = d.rig.deliveredSoFar();
  const lagSamples = sampleLag(d.lag);
  await d.rig.load(rate, s.durationS * 1000, true);
  const lagAtEnd = await d.lag.read();
  const samples = await lagSamples.stop();
  const drainS = await d.rig.drain(Math.max(10_000, s.durationS * 1500));
  const loaded = cpuBetween(cpu0, cpuSnapshot(d.scope));
  const benchUse = process.cpuUsage(bench0);
  // The window's CPU went into every message delivered in it, warm-up stragglers included.
  const deliveredInWindow = d.rig.deliveredSoFar() - delivered0;
  const work = d.work && work0 ? workCost(work0, await workSnapshot(d.work), deliveredInWindow, d.work.logDir) : undefined;
  const { rssMiB, processes } = memoryByComponent(d.scope);
  const counts = d.rig.counts();
  const lagAfterDrain = (await d.lag.read()).total;

  // The raw loop runs on a quiet stack: after a step the pipeline could not keep up with, its
  // backlog would otherwise take the CPU the raw loop is measured with.
  const drained = await d.lag.settle(SETTLE_MAX_MS);
  if (!drained.settled) say(`backlog of ${drained.lag.total} still draining after ${Math.round(drained.waitedS)} s`);
  say(`raw kafkajs loop ${s.rawS} s`);
  const raw = await d.raw.measure(rate, s.rawS * 1000);

  const base = { rate, durationS: s.durationS, ...counts, lag: { atEnd: lagAtEnd, growthPerS: lagGrowthPerS(samples), afterDrain: lagAfterDrain } };
  const step: StepResult = {
    role,
    ...base,
    drainS,
    collapsed: collapsed(counts.offered, counts.delivered),
    raw,
    cpu: cpuCost({ idle, loaded, messages: deliveredInWindow, benchCpuUs: benchUse.user + benchUse.system, cores: s.cores }),
    rssMiB,
    processes,
    ...(work ? { work } : {}),
    verdict: verdict(base),
  };
  say(
    `${counts.delivered}/${counts.offered} delivered, DELIVERED p99 ${Math.round(counts.deliveredLatency.p99)} ms` +
      (step.verdict.sustainable ? ' — sustainable' : ` — not sustainable (${step.verdict.reasons.join('; ')})`),
  );
  if (hopSamples <= 0) return { step };
  say(`reading ${hopSamples} timelines`);
  return { step, hops: await measureHops(d.endpoints, rate, d.rig.sample(hopSamples)) };
}

export async function runSweep(d: SweepDeps, s: SweepSettings): Promise<SweepResult> {
  const steps: StepResult[] = [];
  const skipped: number[] = [];
  const hopRate = s.hopSamples > 0 ? nearestRate(s.rates) : undefined;
  let hops: HopsResult | null = null;
  // Once, before anything is measured: the services' hot paths get compiled and their
  // connections opened, which the first step's own short warm-up (at 50 msg/s, 100 messages)
  // would otherwise leave to its measured window.
  const warmRate = Math.min(RUN_WARMUP_RATE, Math.max(...s.rates));
  d.progress(`  warming the pipeline up: ${RUN_WARMUP_MS / 1000} s at ${warmRate} msg/s, not measured`);
  d.rig.startStep();
  await d.rig.load(warmRate, RUN_WARMUP_MS, false);
  for (const rate of s.rates) {
    if (steps.some((x) => x.role === 'sweep' && x.collapsed) && !s.keepGoing) {
      skipped.push(rate);
      continue;
    }
    const r = await runStep(d, s, rate, 'sweep', rate === hopRate && hops === null ? s.hopSamples : 0);
    steps.push(r.step);
    if (r.hops) hops = r.hops;
  }
  if (skipped.length > 0) d.progress(`  skipped ${skipped.join(', ')} msg/s: an earlier step collapsed (--keep-going runs them anyway)`);

  const max = maxSustainableRate(steps);
  let knee: SweepResult['knee'] = null;
  if (s.knee && max !== null) {
    const { rate60, rate10 } = kneeRates(max);
    d.progress(`  max sustainable ${max} msg/s; knee steps at ${rate60} and ${rate10} msg/s`);
    const at60 = (await runStep(d, s, rate60, 'knee', 0)).step;
    const at10 = (await runStep(d, s, rate10, 'knee', 0)).step;
    steps.push(at60, at10);
    const p99At60 = at60.deliveredLatency.p99;
    const p99At10 = at10.deliveredLatency.p99;
    knee = { rate60, rate10, p99At60, p99At10, ratio: kneeRatio(p99At60, p99At10) };
  }
  // With the agents still connected to ack it: a backlog left behind would load the next
  // user of the stack, and deliveries to agents deregistered meanwhile would end as retries.
  const left = await d.lag.settle(FINAL_SETTLE_MS);
  if (!left.settled) d.progress(`  the stages still had ${left.lag.total} records to consume after ${Math.round(left.waitedS)} s`);
  return { rates: s.rates, steps, maxSustainableRate: max, knee, hops, skipped };
}
