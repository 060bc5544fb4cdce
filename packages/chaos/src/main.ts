import { parseArgs } from 'node:util';
import { chaosReport } from './report.js';
import { FAULTS, LONG, SHORT, type FaultName } from './options.js';
import { runChaos } from './run.js';

// `pnpm chaos [--short | --long] [--rate R] [--via http|kafka] [--phase S] [--cycles N] [--faults a,b] [--json]`
// Run it against the local stack (`reach up`); it kills stack processes, Redis and PostgreSQL.
const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    short: { type: 'boolean', default: false },
    long: { type: 'boolean', default: false },
    rate: { type: 'string' },
    via: { type: 'string' },
    phase: { type: 'string' },
    cycles: { type: 'string' },
    faults: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});
const base = values.long ? LONG : SHORT;
const faults = values.faults ? (values.faults.split(',') as FaultName[]) : base.faults;
const unknown = faults.filter((f) => !(FAULTS as readonly string[]).includes(f));
if (unknown.length > 0) {
  process.stderr.write(`✘ unknown fault ${unknown.join(', ')}; known: ${FAULTS.join(', ')}\n`);
  process.exit(2);
}
if (values.via !== undefined && values.via !== 'http' && values.via !== 'kafka') {
  process.stderr.write(`✘ --via takes http or kafka, not ${values.via}\n`);
  process.exit(2);
}
const options = {
  ...base,
  faults,
  ...(values.via ? { via: values.via as 'http' | 'kafka' } : {}),
  ...(values.rate ? { rate: Number(values.rate) } : {}),
  ...(values.phase ? { phaseS: Number(values.phase) } : {}),
  ...(values.cycles ? { cycles: Number(values.cycles) } : {}),
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
