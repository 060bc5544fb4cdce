import { parseArgs } from 'node:util';
import { chaosReport } from './report.js';
import { FAULTS, LONG, SHORT, type FaultName } from './options.js';
import { runChaos } from './run.js';

const USAGE = `usage: pnpm chaos [--short | --long] [--rate R] [--via http|kafka] [--phase S] [--cycles N] [--faults a,b] [--json]

Runs faults against the running local stack (reach up) under steady load: it kills stack
processes, Redis and PostgreSQL for real (kill -9), then looks every accepted message up.
  --short        the preset npm test runs (default): its faults once, 40 msg/s over HTTP, ~3 min
  --long         every fault, twice, 500 msg/s over HTTP, 15 s phases (~16 min)
  --rate R       messages per second
  --via V        http (POST /v1/messages) or kafka (the ingress topic)
  --phase S      seconds of load before, during and after each fault
  --cycles N     how often the fault list is gone through
  --faults a,b   a subset of: ${FAULTS.join(', ')}
  --json         the report as JSON instead of tables
Exit code 0: every must-be-zero count is 0; 1: one is not (or the run failed); 2: bad usage.
`;

function usageError(message: string): never {
  process.stderr.write(`✘ ${message}\n\n${USAGE}`);
  process.exit(2);
}

function parseCli(): ReturnType<typeof parse> {
  try {
    return parse();
  } catch (err) {
    return usageError((err as Error).message);
  }
}

function parse() {
  return parseArgs({
    args: process.argv.slice(2),
    options: {
      help: { type: 'boolean', short: 'h', default: false },
      short: { type: 'boolean', default: false },
      long: { type: 'boolean', default: false },
      rate: { type: 'string' },
      via: { type: 'string' },
      phase: { type: 'string' },
      cycles: { type: 'string' },
      faults: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  }).values;
}

/** A positive number from a flag, or a usage error naming the flag. */
function positive(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) usageError(`--${flag} takes a positive number, not ${value}`);
  return n;
}

const values = parseCli();
if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const base = values.long ? LONG : SHORT;
const faults = values.faults ? (values.faults.split(',') as FaultName[]) : base.faults;
const unknown = faults.filter((f) => !(FAULTS as readonly string[]).includes(f));
if (unknown.length > 0) {
  usageError(`unknown fault ${unknown.join(', ')}`);
}
if (values.via !== undefined && values.via !== 'http' && values.via !== 'kafka') {
  usageError(`--via takes http or kafka, not ${values.via}`);
}
const rate = positive('rate', values.rate);
const phaseS = positive('phase', values.phase);
const cycles = positive('cycles', values.cycles);
const options = {
  ...base,
  faults,
  ...(values.via ? { via: values.via as 'http' | 'kafka' } : {}),
  ...(rate !== undefined ? { rate } : {}),
  ...(phaseS !== undefined ? { phaseS } : {}),
  ...(cycles !== undefined ? { cycles } : {}),
};
runChaos(options, (line) => process.stderr.write(`${line}\n`)).then(
  (report) => {
    process.stdout.write(`${values.json ? JSON.stringify(report, null, 2) : chaosReport(report)}\n`);
    process.exit(report.ok ? 0 : 1);
  },
  (err: unknown) => {
    process.stderr.write(`✘ chaos failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
