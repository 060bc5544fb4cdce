import { benchCommand } from './command.js';

// `pnpm bench [--rate R --duration S --agents N --producers M --payload B --json]`
benchCommand(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`✘ bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
