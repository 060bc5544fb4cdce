import { parseArgs, type ParseArgsConfig } from 'node:util';
import { usageError } from './api.js';

type ParseArgsOptionsConfig = NonNullable<ParseArgsConfig['options']>;

const COMMON = { json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } } as const;

type Config<O extends ParseArgsOptionsConfig> = { args: string[]; allowPositionals: true; options: typeof COMMON & O };
type Parsed<O extends ParseArgsOptionsConfig> = { values: ReturnType<typeof parseArgs<Config<O>>>['values']; positionals: string[] };

/**
 * The command line of `reach <command> <sub> [args…] [--options]` (dlq, quota, rules): the
 * command's own options plus --json and -h/--help. Gives the exit status instead when there is
 * nothing to run: an unknown or malformed option (the usage on stderr, 2), --help (the usage,
 * 0), no subcommand (the usage, 2). `positionals` starts with the subcommand.
 */
export function parseSubcommand<const O extends ParseArgsOptionsConfig>(argv: string[], options: O, usage: string): Parsed<O> | number {
  let parsed: Parsed<O>;
  try {
    parsed = parseArgs<Config<O>>({ args: argv, allowPositionals: true, options: { ...COMMON, ...options } });
  } catch (err) {
    return usageError(`${(err as Error).message}\n\n${usage}`);
  }
  // The values always hold --help (COMMON), but TypeScript cannot see it through the generic O.
  const help = (parsed.values as { help?: boolean }).help === true;
  if (help || parsed.positionals[0] === undefined) {
    process.stdout.write(usage + '\n');
    return help ? 0 : 2;
  }
  return parsed;
}
