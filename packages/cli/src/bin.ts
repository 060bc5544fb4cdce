#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { ConfigError } from '@reach/core';
import { up } from './commands/up.js';
import { down } from './commands/down.js';
import { ps } from './commands/ps.js';
import { setup } from './commands/setup.js';
import { restart } from './commands/restart.js';

const USAGE = `reach — the Agent-Reach command line

  reach up [--detach]     start the whole local stack (Kafka, schema registry, services); Ctrl-C stops it
  reach down              stop a stack started with --detach (or another terminal's reach up)
  reach ps [--json]       processes of the local stack and their readiness (exit 0 when all ready)
  reach setup             the deploy step alone: migrations, topics, schema registration
  reach restart <name>    restart one component of the running stack from the current build

Options: --json for machine-readable output. Configuration: REACH_* environment variables (README).`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: { detach: { type: 'boolean', default: false }, json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } },
  });
  switch (command) {
    case 'up':
      return up({ detach: values.detach });
    case 'down':
      return down();
    case 'ps':
      return ps({ json: values.json });
    case 'setup':
      return setup();
    case 'restart':
      return restart(positionals[0]);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE + '\n');
      return command === undefined ? 1 : 0;
    default:
      process.stderr.write(`unknown command ${command}\n\n${USAGE}\n`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`✘ ${err instanceof ConfigError ? err.message : err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
