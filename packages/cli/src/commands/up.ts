import { spawn } from 'node:child_process';
import { openSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { paths, reachHome } from '../paths.js';
import { done, step, table, warn } from '../output.js';
import { alive, clearState, readState, upStack, type StackState } from '../local/stack.js';
import { tail } from '../local/supervisor.js';

function printEndpoints(state: StackState): void {
  process.stdout.write('\n' + table(Object.entries(state.endpoints).map(([name, url]) => ({ component: name, endpoint: url }))));
  process.stdout.write(`\nWebSocket:   ws://127.0.0.1:7412/v1/connect\n`);
  if (state.adminTokenFile) process.stdout.write(`Admin token: ${state.adminTokenFile}\n`);
  process.stdout.write(`Logs:        ${reachHome()}/logs/\n`);
}

/** `reach up`: foreground (Ctrl-C stops everything) or `--detach` (a background supervisor). */
export async function up(args: { detach: boolean }): Promise<number> {
  const p = paths(reachHome());
  const existing = readState(p);
  if (existing && alive(existing.supervisorPid)) {
    if (existing.ready) {
      done(`the stack is already running (supervisor pid ${existing.supervisorPid})`);
      printEndpoints(existing);
      return 0;
    }
    warn(`a stack is starting or failing (pid ${existing.supervisorPid}); run \`reach down\` first`);
    return 1;
  }
  if (args.detach) return upDetached();

  let result: Awaited<ReturnType<typeof upStack>>;
  try {
    result = await upStack(process.env);
  } catch (err) {
    process.stderr.write(`\n✘ reach up failed: ${(err as Error).message}\n`);
    return 1;
  }
  const { supervisor, state } = result;
  done('Agent-Reach is up');
  printEndpoints(state);
  process.stdout.write('\nPress Ctrl-C to stop everything.\n');
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  step('stopping');
  await supervisor.stopAll();
  clearState(p);
  done('stopped');
  return 0;
}

/** Starts `reach up` as a detached supervisor, waits until it is ready (or failed), then returns. */
async function upDetached(): Promise<number> {
  const p = paths(reachHome());
  clearState(p);
  const logFile = join(p.logs, 'reach-up.log');
  const out = openSync(logFile, 'a');
  const bin = fileURLToPath(new URL('../bin.js', import.meta.url));
  const child = spawn(process.execPath, [bin, 'up'], { detached: true, stdio: ['ignore', out, out], env: process.env });
  child.unref();
  step(`starting the stack in the background (pid ${child.pid}); progress in ${logFile}`);
  const deadline = Date.now() + 15 * 60_000;
  let shown = 0;
  for (;;) {
    await new Promise((r) => setTimeout(r, 500));
    const log = tail(logFile, 400).split('\n');
    const lines = log.filter((l) => /^[▸✔!✘]/.test(l.replace(/^\r/, '')));
    for (const l of lines.slice(shown)) process.stderr.write(l.replace(/\r.*▸/, '▸') + '\n');
    shown = lines.length;
    const state = readState(p);
    if (state?.ready) {
      done('Agent-Reach is up (detached); `reach down` stops it');
      printEndpoints(state);
      return 0;
    }
    if (!alive(child.pid) || state?.error) {
      process.stderr.write(`✘ reach up failed${state?.error ? `: ${state.error}` : ''}\n${tail(logFile, 20)}\n`);
      return 1;
    }
    if (Date.now() > deadline) {
      process.stderr.write('✘ reach up did not become ready in 15 minutes\n');
      return 1;
    }
  }
}
