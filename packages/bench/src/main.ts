import { benchCommand } from './command.js';

// `pnpm bench [--sweep 50,250,1000 | --rate R] [--idle] [--idle-agents N] [--tracker] [--compare] [--save-baseline] [--json]`
// `pnpm bench --mix [--agents N --concurrency C --handler-ms MS --high-rate R --flood-rate R --idle S --duration S --drain S]`
// (command.ts lists every option; run it under `flock /tmp/reach-stack.lock`)
benchCommand(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`✘ bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
