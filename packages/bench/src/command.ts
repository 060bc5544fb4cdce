import { readFileSync, writeFileSync, mkdirSync, existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { silentLogger } from '@reach/core';
import { createKafka } from '@reach/kafka';
import { createPgPool, createRedis } from '@reach/store';
import { compareReports, mergeBaseline, trustedSections } from './compare.js';
import { ConsumerLag } from './consumer-lag.js';
import { measureIdle, measureIdleAgents } from './idle.js';
import { measureSingle } from './single.js';
import { runMixBench } from './mix.js';
import { PipelineRig } from './pipeline.js';
import { RawLoop } from './raw.js';
import { compareReport, fullReport, idleAgentsReport, idleReport, singleReport, sweepReport, toJson, trackerReport } from './report.js';
import type { BenchReport } from './results.js';
import { stackScope } from './proc-cpu.js';
import { waitForStack } from './stack.js';
import { runSweep, type SweepSettings } from './sweep.js';
import { trackerCeiling } from './tracker-ceiling.js';

/**
 * `reach bench` / `pnpm bench`: the modes (each prints tables, or with --json the same figures
 * as one JSON document), run in this order when several are given — the idle ones first, so
 * no earlier load is still draining while they measure. HELP is what `--help` prints.
 */
export const HELP = `pnpm bench [mode…] [options]   (loads the shared local stack: run it under flock /tmp/reach-stack.lock)

modes (several may be given; the idle ones run first):
  --idle [--idle-seconds 30]             the stack's CPU with no traffic
  --idle-agents N [--idle-seconds 30]    the CPU N connected idle agents add
  --single N                             N messages one at a time on the idle stack: HTTP submit → DELIVERED
  --sweep 50,250,1000 [--duration 10]    one step per rate, max sustainable rate, knee ratio (--no-knee: skip its steps)
  --rate R [--duration 20]               one step (no knee); the default is --rate 1000
  --tracker [--tracker-messages 20000]   the tracker writer's own ceiling
  --mix                                  priority lanes under a backlog (--agents --concurrency --handler-ms --high-rate --flood-rate --idle --drain)

comparing:
  --compare [--baseline F] [--from F]    today ÷ baseline for every figure (--from: a saved --json run)
  --save-baseline [--baseline F]         write this run's sections into the baseline (bench/baseline.json)

other options: --json --agents N --payload BYTES --producers N --warmup S --cpu-idle S --raw-duration S
  --keep-going --hop-samples N --agent-ttl S --tracker-spread N --tracker-timeout S
`;

const COMMON = {
  json: { type: 'boolean', default: false },
  agents: { type: 'string' },
  payload: { type: 'string', default: '256' },
  duration: { type: 'string' },
} as const;

const MIX_OPTIONS = {
  ...COMMON,
  mix: { type: 'boolean', default: false },
  concurrency: { type: 'string', default: '2' },
  'handler-ms': { type: 'string', default: '20' },
  'high-rate': { type: 'string', default: '20' },
  'flood-rate': { type: 'string' },
  // --mix's idle phase, in seconds (without --mix, --idle is the idle-CPU mode)
  idle: { type: 'string', default: '5' },
  drain: { type: 'string', default: '60' },
} as const;

const OPTIONS = {
  ...COMMON,
  producers: { type: 'string', default: '2' },
  rate: { type: 'string' },
  sweep: { type: 'string' },
  warmup: { type: 'string', default: '2' },
  'cpu-idle': { type: 'string', default: '5' },
  'raw-duration': { type: 'string' },
  'no-knee': { type: 'boolean', default: false },
  'keep-going': { type: 'boolean', default: false },
  'hop-samples': { type: 'string', default: '200' },
  idle: { type: 'boolean', default: false },
  'idle-seconds': { type: 'string', default: '30' },
  'idle-agents': { type: 'string' },
  'agent-ttl': { type: 'string', default: '3600' },
  single: { type: 'string' },
  tracker: { type: 'boolean', default: false },
  'tracker-messages': { type: 'string', default: '20000' },
  'tracker-spread': { type: 'string', default: '250' },
  'tracker-timeout': { type: 'string', default: '120' },
  compare: { type: 'boolean', default: false },
  'save-baseline': { type: 'boolean', default: false },
  baseline: { type: 'string' },
  from: { type: 'string' },
} as const;

/** How long a run waits for a stack that is (re)starting. */
const STACK_WAIT_MS = 120_000;

export function adminTokenFrom(env: NodeJS.ProcessEnv, root: string): string {
  if (env.REACH_ADMIN_TOKEN) return env.REACH_ADMIN_TOKEN;
  return readFileSync(join(env.REACH_HOME ?? join(root, '.reach'), 'admin-token'), 'utf8').trim();
}

/** A saved --json run; whatever precedes the document (`pnpm bench`'s own banner) is skipped. */
function readReport(path: string): BenchReport {
  const text = readFileSync(path, 'utf8');
  const report = JSON.parse(text.slice(Math.max(0, text.indexOf('{')))) as BenchReport;
  if (report.kind !== 'reach-bench') throw new Error(`${path} is not the --json output of reach bench`);
  return report;
}

function num(name: string, v: string | undefined, fallback?: number): number {
  const n = v === undefined ? fallback : Number(v);
  if (n === undefined || !Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a non-negative number (got ${v})`);
  return n;
}

export function parseRates(list: string): number[] {
  const rates = list.split(',').map((x) => Number(x.trim()));
  if (rates.length === 0 || rates.some((r) => !Number.isFinite(r) || r <= 0)) throw new Error(`--sweep wants a comma list of positive rates (got ${list})`);
  return rates;
}

function endpointsFrom(env: NodeJS.ProcessEnv, root: string) {
  const host = !env.REACH_HTTP_HOST || env.REACH_HTTP_HOST === '0.0.0.0' ? '127.0.0.1' : env.REACH_HTTP_HOST;
  return {
    brokers: (env.REACH_KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
    registryUrl: `http://${host}:${env.REACH_REGISTRY_PORT ?? 7411}`,
    ingressUrl: `http://${host}:${env.REACH_INGRESS_PORT ?? 7410}`,
    dispatcherUrl: `http://${host}:${env.REACH_DISPATCHER_PORT ?? 7412}`,
    trackerUrl: `http://${host}:${env.REACH_TRACKER_PORT ?? 7413}`,
    // Every service's /metrics, for the work counted per message (work-count.ts).
    serviceUrls: {
      ingress: `http://${host}:${env.REACH_INGRESS_PORT ?? 7410}`,
      registry: `http://${host}:${env.REACH_REGISTRY_PORT ?? 7411}`,
      dispatcher: `http://${host}:${env.REACH_DISPATCHER_PORT ?? 7412}`,
      tracker: `http://${host}:${env.REACH_TRACKER_PORT ?? 7413}`,
      'dead-letter': `http://${host}:${env.REACH_DEAD_LETTER_PORT ?? 7414}`,
      router: `http://${host}:${env.REACH_ROUTER_PORT ?? 7415}`,
      'retry-scheduler': `http://${host}:${env.REACH_RETRY_SCHEDULER_PORT ?? 7416}`,
    },
    redisUrl: env.REACH_REDIS_URL ?? 'redis://127.0.0.1:6379/0',
    databaseUrl: env.REACH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/reach',
    wsUrl: `ws://${host}:${env.REACH_DISPATCHER_PORT ?? 7412}/v1/connect`,
    // the development registry of a stack whose ports were moved (`reach up`), unless one is named
    schemaRegistryUrl: env.REACH_SCHEMA_REGISTRY_URL ?? `http://${host}:${env.REACH_DEV_SCHEMA_REGISTRY_PORT ?? 8081}`,
    adminToken: adminTokenFrom(env, root),
  };
}

async function mixCommand(argv: string[], endpoints: ReturnType<typeof endpointsFrom>, print: (text: string) => void): Promise<number> {
  const { values } = parseArgs({ args: argv, options: MIX_OPTIONS });
  const agents = num('agents', values.agents, 2);
  const concurrency = num('concurrency', values.concurrency);
  const handlerMs = num('handler-ms', values['handler-ms']);
  // 1.5 × what the agents can handle, unless told: a backlog must form in the dispatcher (and
  // not upstream: the flood stays well within what ingress and router sustain).
  const floodRate = num('flood-rate', values['flood-rate'], Math.round(((agents * concurrency * 1000) / handlerMs) * 1.5));
  await runMixBench(
    {
      ...endpoints,
      agents,
      concurrency,
      handlerMs,
      highRate: num('high-rate', values['high-rate']),
      floodRate,
      idleS: num('idle', values.idle),
      durationS: num('duration', values.duration, 10),
      drainS: num('drain', values.drain),
      payloadBytes: num('payload', values.payload),
      json: values.json,
    },
    print,
  );
  return 0;
}

/** `reach bench` / `pnpm bench`: parses the options and runs the modes against the local stack. */
export async function benchCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const root = fileURLToPath(new URL('../../../', import.meta.url));
  const print = (text: string) => void process.stdout.write(text);
  const progress = (line: string) => void process.stderr.write(`${line}\n`);
  if (argv.includes('--help') || argv.includes('-h')) {
    print(HELP);
    return 0;
  }
  const endpoints = endpointsFrom(env, root);
  if (argv.includes('--mix')) return mixCommand(argv, endpoints, print);

  const { values: v } = parseArgs({ args: argv, options: OPTIONS });
  const baselinePath = resolve(root, v.baseline ?? 'bench/baseline.json');
  const cores = availableParallelism();
  const wantsSweep = v.sweep !== undefined || v.rate !== undefined;
  const anyMode = wantsSweep || v.idle || v['idle-agents'] !== undefined || v.single !== undefined || v.tracker;
  // No mode at all: one step at 1,000 msg/s, as `pnpm bench` always did (unless only comparing a saved run).
  const rate = v.rate ?? (anyMode || v.from ? undefined : '1000');

  let report: BenchReport;
  if (v.from) {
    report = readReport(resolve(v.from));
    if (!v.json) print(fullReport(report));
  } else {
    report = { kind: 'reach-bench', version: 1, at: new Date().toISOString(), host: { cores, node: process.version }, settings: {} };
    const out = (text: string) => (v.json ? undefined : print(text));
    const scope = stackScope(env.REACH_HOME ?? join(root, '.reach'));
    if (scope.supervisorPid === undefined) progress('no running supervisor in REACH_HOME: CPU and memory of every stack-like process on the machine');
    await waitForStack([endpoints.ingressUrl, endpoints.registryUrl, endpoints.dispatcherUrl, endpoints.trackerUrl], STACK_WAIT_MS, progress);

    if (v.idle) {
      const seconds = num('idle-seconds', v['idle-seconds']);
      progress(`idle: ${seconds} s with no traffic`);
      report.idle = await measureIdle(scope, seconds);
      report.settings.idle = { seconds };
      out(idleReport(report.idle));
    }
    if (v['idle-agents'] !== undefined) {
      const settings = {
        agents: num('idle-agents', v['idle-agents']),
        seconds: num('idle-seconds', v['idle-seconds']),
        ttlS: num('agent-ttl', v['agent-ttl']),
      };
      progress(`idle agents: ${settings.agents}`);
      report.idleAgents = await measureIdleAgents(endpoints, { ...settings, scope, progress });
      report.settings.idleAgents = settings;
      out(idleAgentsReport(report.idleAgents));
    }
    if (v.single !== undefined) {
      const settings = { messages: num('single', v.single) };
      progress(`single: ${settings.messages} messages one at a time`);
      report.single = await measureSingle(endpoints, { ...settings, progress });
      report.settings.single = settings;
      out(singleReport(report.single));
    }
    if (v.sweep !== undefined || rate !== undefined) {
      const rates = v.sweep !== undefined ? parseRates(v.sweep) : [num('rate', rate)];
      const durationS = num('duration', v.duration, v.sweep !== undefined ? 10 : 20);
      const settings: SweepSettings = {
        rates,
        durationS,
        warmupS: num('warmup', v.warmup),
        cpuIdleS: num('cpu-idle', v['cpu-idle']),
        rawS: num('raw-duration', v['raw-duration'], Math.min(durationS, 5)),
        knee: v.sweep !== undefined && !v['no-knee'],
        hopSamples: num('hop-samples', v['hop-samples']),
        keepGoing: v['keep-going'],
        cores,
      };
      const agents = num('agents', v.agents, 10);
      const payloadBytes = num('payload', v.payload);
      const kafka = createKafka({ brokers: endpoints.brokers, clientId: 'reach-bench', logger: silentLogger });
      progress(`sweep ${rates.join(', ')} msg/s: setting up ${agents} agents, the raw loop and the lag reader`);
      const rig = await PipelineRig.open({ ...endpoints, kafka, agents, producers: num('producers', v.producers), payloadBytes, maxRate: Math.max(...rates) });
      const raw = await RawLoop.open(kafka, { payloadBytes, partitions: 6 }).catch(async (err: unknown) => {
        await rig.close();
        throw err;
      });
      const admin = kafka.admin();
      const redis = createRedis(endpoints.redisUrl, silentLogger, { connectionName: 'reach-bench' });
      const pg = createPgPool(endpoints.databaseUrl, { max: 1, applicationName: 'reach-bench' });
      try {
        await admin.connect();
        progress(`  ${rig.quota}`);
        const lag = new ConsumerLag(admin);
        const work = {
          admin,
          redis,
          pg,
          services: endpoints.serviceUrls,
          logDir: join(env.REACH_HOME ?? join(root, '.reach'), 'logs'),
          groups: () => lag.committingGroups,
        };
        report.sweep = await runSweep({ rig, raw, lag, endpoints, scope, work, progress }, settings);
      } finally {
        await Promise.all([rig.close(), raw.close()]);
        await admin.disconnect().catch(() => undefined);
        redis.disconnect();
        await pg.end().catch(() => undefined);
      }
      report.settings.sweep = { ...settings, agents, payloadBytes, producers: num('producers', v.producers) };
      out(sweepReport(report.sweep, { ...settings, agents, payloadBytes }));
    }
    if (v.tracker) {
      const settings = {
        messages: num('tracker-messages', v['tracker-messages']),
        spread: num('tracker-spread', v['tracker-spread']),
        timeoutS: num('tracker-timeout', v['tracker-timeout']),
      };
      progress(`tracker ceiling: ${settings.messages} messages`);
      const kafka = createKafka({ brokers: endpoints.brokers, clientId: 'reach-bench-tracker', logger: silentLogger });
      report.tracker = await trackerCeiling({ ...endpoints, kafka, ...settings, scope, progress });
      report.settings.tracker = settings;
      out(trackerReport(report.tracker));
    }
  }

  let compared: ReturnType<typeof compareReports> | undefined;
  if (v.compare) {
    if (!existsSync(baselinePath)) throw new Error(`no baseline at ${baselinePath}: write one with --save-baseline`);
    const baseline = readReport(baselinePath);
    compared = compareReports(baseline, report);
    if (!v.json) print(compareReport(compared, baseline.at));
  }
  if (v.json) print(toJson(compared ? { ...report, compare: compared } : report));
  if (v['save-baseline']) {
    const { trusted, suspect } = trustedSections(report);
    for (const [section, why] of suspect) progress(`not saved into the baseline: ${section} (${why}); run it again`);
    if (Object.keys(trusted.settings).length > 0) {
      const previous = existsSync(baselinePath) ? readReport(baselinePath) : undefined;
      mkdirSync(dirname(baselinePath), { recursive: true });
      writeFileSync(baselinePath, toJson(mergeBaseline(previous, trusted)));
      progress(`baseline written: ${baselinePath}`);
    }
  }
  return 0;
}
