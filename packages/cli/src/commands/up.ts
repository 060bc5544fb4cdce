import { spawn } from 'node:child_process';
import { existsSync, openSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { paths, reachHome } from '../paths.js';
import { done, step, table, warn } from '../output.js';
import { MAX_LOCAL_BROKERS } from '../local/kafka.js';
import { MAX_INSTANCES, alive, clearState, readState, upStack, type StackState, type UpOptions } from '../local/stack.js';
import { tail } from '../local/supervisor.js';

export const UP_USAGE = `  reach up [--detach] [--brokers N] [--instances N] [--kafka-port P] [--kafka-controller-port P]
                          start the whole local stack (Kafka, schema registry, services); Ctrl-C stops it.
                          --brokers N: a local Kafka cluster of N broker+controller nodes (1…${MAX_LOCAL_BROKERS}; topics
                          RF min(N,3)); --instances N: N instances of every service but the console (1…${MAX_INSTANCES}),
                          instance i on its REACH_*_PORT + 100·(i−1); --kafka-port: first broker port (9092),
                          --kafka-controller-port: first controller port (kafka port + N). REACH_HOME: the state dir.`;

function printEndpoints(state: StackState): void {
  process.stdout.write('\n' + table(Object.entries(state.endpoints).map(([name, url]) => ({ component: name, endpoint: url }))));
  const dispatcher = state.endpoints.dispatcher;
  if (dispatcher) process.stdout.write(`\nWebSocket:   ${dispatcher.replace(/^http/, 'ws')}/v1/connect\n`);
  if (state.replication)
    process.stdout.write(`Topics:      RF ${state.replication.replicationFactor}, min.insync.replicas ${state.replication.minInsyncReplicas}\n`);
  if (state.adminTokenFile) process.stdout.write(`Admin token: ${state.adminTokenFile}\n`);
  process.stdout.write(`Logs:        ${reachHome()}/logs/\n`);
}

function intOption(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw)) throw new Error(`--${name} must be a positive integer (got ${JSON.stringify(raw)})`);
  return Number(raw);
}

/** Parses `reach up`'s options (the REACH_* environment configures the rest). */
export function parseUpArgs(argv: readonly string[]): { detach: boolean; options: UpOptions } {
  const { values } = parseArgs({
    args: [...argv],
    allowPositionals: false,
    options: {
      detach: { type: 'boolean', default: false },
      brokers: { type: 'string' },
      instances: { type: 'string' },
      'kafka-port': { type: 'string' },
      'kafka-controller-port': { type: 'string' },
    },
  });
  const options: UpOptions = {};
  const set = <K extends keyof UpOptions>(key: K, v: number | undefined) => {
    if (v !== undefined) options[key] = v;
  };
  set('brokers', intOption('brokers', values.brokers));
  set('instances', intOption('instances', values.instances));
  set('kafkaPort', intOption('kafka-port', values['kafka-port']));
  set('kafkaControllerPort', intOption('kafka-controller-port', values['kafka-controller-port']));
  return { detach: values.detach, options };
}

/** The command line that asks for `options` (what a detached `reach up` is started with). */
function upArgv(options: UpOptions): string[] {
  const out: string[] = [];
  if (options.brokers !== undefined) out.push('--brokers', String(options.brokers));
  if (options.instances !== undefined) out.push('--instances', String(options.instances));
  if (options.kafkaPort !== undefined) out.push('--kafka-port', String(options.kafkaPort));
  if (options.kafkaControllerPort !== undefined) out.push('--kafka-controller-port', String(options.kafkaControllerPort));
  return out;
}

/** `reach up [options]`. */
export async function upCommand(argv: readonly string[]): Promise<number> {
  let parsed: ReturnType<typeof parseUpArgs>;
  try {
    parsed = parseUpArgs(argv);
  } catch (err) {
    process.stderr.write(`✘ ${(err as Error).message}\n\n${UP_USAGE}\n`);
    return 2;
  }
  return up(parsed);
}

/** `reach up`: foreground (Ctrl-C stops everything) or `--detach` (a background supervisor). */
export async function up(args: { detach: boolean; options?: UpOptions }): Promise<number> {
  const options = args.options ?? {};
  const p = paths(reachHome());
  const existing = readState(p);
  if (existing && alive(existing.supervisorPid)) {
    if (existing.ready) {
      done(`the stack of ${p.home} is already running (supervisor pid ${existing.supervisorPid})`);
      const was = existing.options;
      if (was && ((options.brokers ?? 1) !== (was.brokers ?? 1) || (options.instances ?? 1) !== (was.instances ?? 1))) {
        warn(`it runs ${was.brokers ?? 1} broker(s) and ${was.instances ?? 1} instance(s) per service; \`reach down\` first to change that`);
      }
      printEndpoints(existing);
      return 0;
    }
    warn(`a stack is starting or failing (pid ${existing.supervisorPid}); run \`reach down\` first`);
    return 1;
  }
  if (args.detach) return upDetached(options);

  let result: Awaited<ReturnType<typeof upStack>>;
  try {
    result = await upStack(process.env, undefined, options);
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
async function upDetached(options: UpOptions): Promise<number> {
  const p = paths(reachHome());
  clearState(p);
  const logFile = join(p.logs, 'reach-up.log');
  // The log is appended to run after run: show only this run's lines.
  const from = existsSync(logFile) ? statSync(logFile).size : 0;
  const out = openSync(logFile, 'a');
  const bin = fileURLToPath(new URL('../bin.js', import.meta.url));
  const child = spawn(process.execPath, [bin, 'up', ...upArgv(options)], { detached: true, stdio: ['ignore', out, out], env: process.env });
  child.unref();
  step(`starting the stack in the background (pid ${child.pid}); progress in ${logFile}`);
  const deadline = Date.now() + 15 * 60_000;
  let shown = 0;
  for (;;) {
    await new Promise((r) => setTimeout(r, 500));
    const log = readFileSync(logFile).subarray(from).toString('utf8').split('\n');
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
