import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

/** The built `reach` CLI, run as a user runs it: a child process against the running stack. */
export const REACH_BIN = join(process.cwd(), 'packages', 'cli', 'dist', 'bin.js');
const run = promisify(execFile);

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `reach <args…>`; never throws for a non-zero exit (the test asserts the code). */
export async function reachCli(args: readonly string[], env: NodeJS.ProcessEnv = process.env, timeoutMs = 45_000): Promise<CliResult> {
  try {
    const { stdout, stderr } = await run(process.execPath, [REACH_BIN, ...args], { timeout: timeoutMs, env });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}
