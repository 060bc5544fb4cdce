import { parseArgs } from 'node:util';
import { fuzzReport } from './fuzz/report.js';
import { runFuzz } from './fuzz/run.js';

const USAGE = `usage: pnpm fuzz [--cases N] [--seed S] [--settle S] [--json]

Generated inputs against the running local stack (reach up) on every public way in: HTTP
submissions, Kafka ingress records, agent WebSocket frames and result frames. Then checks that
every accepted message ended, every result was stored as sent or refused with a code, no 5xx
but 503 was answered, and every service still serves.
  --cases N    generated cases (default 100000)
  --seed S     the generator's seed (default: the time); a run prints it to replay it
  --settle S   seconds accepted messages get to end after the last case (default 120)
  --json       the report as JSON
Exit code 0: every check holds; 1: one does not (or the run failed); 2: bad usage.
`;

function main(): void {
  let values: { cases?: string; seed?: string; settle?: string; json?: boolean; help?: boolean };
  try {
    values = parseArgs({
      args: process.argv.slice(2),
      options: {
        cases: { type: 'string' },
        seed: { type: 'string' },
        settle: { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }).values;
  } catch (err) {
    process.stderr.write(`✘ ${(err as Error).message}\n\n${USAGE}`);
    process.exit(2);
  }
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  const num = (flag: string, v: string | undefined, def: number) => {
    const n = v === undefined ? def : Number(v);
    if (!Number.isInteger(n) || n <= 0) {
      process.stderr.write(`✘ --${flag} takes a positive integer, not ${v}\n\n${USAGE}`);
      process.exit(2);
    }
    return n;
  };
  const options = {
    cases: num('cases', values.cases, 100_000),
    seed: num('seed', values.seed, Date.now() % 2 ** 31),
    settleMs: num('settle', values.settle, 120) * 1000,
  };
  runFuzz(options, (line) => process.stderr.write(`▸ ${line}\n`)).then(
    (report) => {
      process.stdout.write(values.json ? JSON.stringify(report, null, 2) + '\n' : fuzzReport(report));
      process.exitCode = report.ok ? 0 : 1;
    },
    (err: unknown) => {
      process.stderr.write(`✘ fuzz failed: ${(err as Error).stack ?? String(err)}\n`);
      process.exitCode = 1;
    },
  );
}

main();
