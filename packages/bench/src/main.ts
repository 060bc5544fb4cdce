import { benchCommand } from './command.js';

// `pnpm bench [--rate R --duration S --agents N --producers M --payload B --json]`
// `pnpm bench --mix [--agents N --concurrency C --handler-ms MS --high-rate R --flood-rate R --idle S --duration S --drain S]`
benchCommand(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`✘ bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
