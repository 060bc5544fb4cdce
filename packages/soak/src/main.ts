import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { DEFAULTS, type SoakOptions } from './options.js';
import { soakReport } from './report.js';
import { runSoak } from './run.js';

const USAGE = `usage: pnpm soak [--minutes N] [--rate R] [--fail-rate F] [--agents P] [--sample-s S] [--warmup-s S]
                 [--churn-s S] [--settle-s S] [--json FILE]

Steady HTTP traffic through SDK agents (failing --fail-rate of their work, retried) plus one
agent process that comes and goes every --churn-s, against the running stack of REACH_HOME.
Samples every --sample-s: RSS of every process, PostgreSQL table and index bytes, Redis bytes
and keys, Kafka log bytes, consumer lag, open circuits. Ends with a table and a verdict.
Start the stack with retention shortened to see data dropped, e.g.
  REACH_RETENTION_MESSAGES=600 REACH_PARTITION_INTERVAL=120 REACH_IDEMPOTENCY_TTL_S=300 pnpm start
Defaults: ${DEFAULTS.minutes} min at ${DEFAULTS.rate} msg/s, ${DEFAULTS.failRate * 100} % failures, warm-up ${DEFAULTS.warmupS} s.
Exit code 0: the verdict holds; 1: it does not; 2: bad usage or the run failed.
`;

let values: Record<string, string | boolean | undefined>;
try {
  values = parseArgs({
    args: process.argv.slice(2),
    options: {
      minutes: { type: 'string' },
      rate: { type: 'string' },
      'fail-rate': { type: 'string' },
      'sample-s': { type: 'string' },
      'warmup-s': { type: 'string' },
      'churn-s': { type: 'string' },
      'settle-s': { type: 'string' },
      agents: { type: 'string' },
      json: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  }).values;
} catch (err) {
  process.stderr.write(`✘ ${(err as Error).message}\n\n${USAGE}`);
  process.exit(2);
}
if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const str = (name: string): string | undefined => (typeof values[name] === 'string' ? (values[name] as string) : undefined);

function num(name: string, def: number, min: number): number {
  const raw = str(name);
  if (raw === undefined) return def;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min) {
    process.stderr.write(`✘ --${name} must be a number ≥ ${min}, got ${raw}\n\n${USAGE}`);
    process.exit(2);
  }
  return n;
}

const minutes = num('minutes', DEFAULTS.minutes, 0.5);
const o: SoakOptions = {
  ...DEFAULTS,
  minutes,
  rate: num('rate', DEFAULTS.rate, 1),
  failRate: num('fail-rate', DEFAULTS.failRate, 0),
  sampleS: num('sample-s', DEFAULTS.sampleS, 5),
  // a short run warms up for its first third
  warmupS: num('warmup-s', Math.min(DEFAULTS.warmupS, (minutes * 60) / 3), 0),
  churnS: num('churn-s', DEFAULTS.churnS, 5),
  settleS: num('settle-s', DEFAULTS.settleS, 5),
  agentProcesses: num('agents', DEFAULTS.agentProcesses, 1),
};

runSoak(o, process.env, (line) => process.stderr.write(`${line}\n`)).then(
  (report) => {
    process.stdout.write(`${soakReport(report)}\n`);
    const json = str('json');
    if (json) writeFileSync(json, JSON.stringify(report, null, 2) + '\n');
    process.exit(report.verdict.ok ? 0 : 1);
  },
  (err: unknown) => {
    process.stderr.write(`✘ soak failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(2);
  },
);
