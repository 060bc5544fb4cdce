import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { silentLogger } from '@reach/core';
import { createKafka } from '@reach/kafka';

/**
 * Faults as they happen: SIGKILL of a stack process (the supervisor of `reach up` restarts
 * services and the Kafka broker), and of the machine's Redis and PostgreSQL servers, which are
 * then started again the way the machine starts them (their init script, pg_ctlcluster).
 */
const run = promisify(execFile);
const CLI = fileURLToPath(new URL('../../cli/dist/bin.js', import.meta.url));

export interface StackProcess {
  name: string;
  pid: number | null;
  alive: boolean;
  ready: boolean;
  restarts: number;
}

export async function stackProcesses(): Promise<StackProcess[]> {
  // `reach ps` exits non-zero while a process is not ready (a broker still restarting): its
  // JSON is printed all the same, and is what we need. On a machine saturated by the load it
  // can also time out without printing anything (a long run died of that): asked again then.
  for (let attempt = 1; ; attempt++) {
    const stdout = await run(process.execPath, [CLI, 'ps', '--json'], { timeout: 15_000, maxBuffer: 1 << 20 }).then(
      (r) => r.stdout,
      (err: { stdout?: string }) => {
        if (!err.stdout && attempt >= 3) throw err;
        return err.stdout ?? '';
      },
    );
    if (stdout) return (JSON.parse(stdout) as { processes: StackProcess[] }).processes;
  }
}

/** The Kafka nodes of `reach up --brokers N` (id, process name, address); empty for one broker. */
export async function kafkaNodes(): Promise<Array<{ id: number; name: string; address: string }>> {
  const stdout = await run(process.execPath, [CLI, 'ps', '--json'], { timeout: 15_000, maxBuffer: 1 << 20 }).then(
    (r) => r.stdout,
    (err: { stdout?: string }) => err.stdout ?? '{}',
  );
  return (JSON.parse(stdout) as { kafkaNodes?: Array<{ id: number; name: string; address: string }> }).kafkaNodes ?? [];
}

/** The broker id leading each partition of `topic`. */
export async function partitionLeaders(brokers: readonly string[], topic: string): Promise<number[]> {
  const admin = createKafka({ brokers, clientId: 'reach-chaos', logger: silentLogger, connectionTimeoutMs: 2_000 }).admin();
  await admin.connect();
  try {
    const meta = await admin.fetchTopicMetadata({ topics: [topic] });
    return meta.topics[0]!.partitions.sort((a, b) => a.partitionId - b.partitionId).map((p) => p.leader);
  } finally {
    await admin.disconnect();
  }
}

/** SIGKILLs the first process of the stack named `name`; returns its pid and when it died. */
export async function killStackProcess(name: string): Promise<{ pid: number; at: number }> {
  const p = (await stackProcesses()).find((x) => x.name === name && x.alive && x.pid !== null);
  if (!p) throw new Error(`no live stack process named ${name} (is \`reach up\` running?)`);
  process.kill(p.pid!, 'SIGKILL');
  return { pid: p.pid!, at: Date.now() };
}

/** Resolves with the new pid when the process `name` runs again and is ready (or just runs: `ready: false`). */
export async function waitRestarted(name: string, oldPid: number, opts: { maxMs?: number; ready?: boolean } = {}): Promise<number> {
  const maxMs = opts.maxMs ?? 90_000;
  const until = Date.now() + maxMs;
  while (Date.now() < until) {
    const p = (await stackProcesses().catch(() => [])).find((x) => x.name === name);
    if (p && p.pid !== null && p.pid !== oldPid && p.alive && (p.ready || opts.ready === false)) return p.pid;
    await sleep(opts.ready === false ? 50 : 250);
  }
  throw new Error(`${name} did not come back within ${maxMs / 1000} s`);
}

function pidsOf(exe: string): Promise<number[]> {
  return run('pgrep', ['-x', exe]).then(
    ({ stdout }) => stdout.split(/\s+/).filter(Boolean).map(Number),
    () => [],
  );
}

async function until(what: string, check: () => Promise<boolean>, maxMs: number): Promise<void> {
  const end = Date.now() + maxMs;
  while (Date.now() < end) {
    if (await check()) return;
    await sleep(200);
  }
  throw new Error(`${what} not within ${maxMs / 1000} s`);
}

const REDIS_CONF = '/etc/redis/redis.conf';
const redisAnswers = () =>
  run('redis-cli', ['PING'], { timeout: 2000 }).then(
    ({ stdout }) => stdout.trim() === 'PONG',
    () => false,
  );

/**
 * kill -9 of redis-server; started again after `downMs` as it ran before: by its init script
 * when it ran as the redis user, else (a server started by hand as root) with its config file
 * as the same user — the init script would start it as `redis`, which cannot write a data dir
 * that root owns, and Redis then refuses every write (MISCONF).
 */
export async function killRedis(downMs: number): Promise<void> {
  const pids = await pidsOf('redis-server');
  const asRoot = pids.some((pid) => statSync(`/proc/${pid}`).uid === 0);
  // Its persistence as it runs (`reach up` turns the append-only file on at run time), so the
  // restarted server loads what the killed one wrote instead of the config file's defaults.
  const persistence = asRoot ? await redisPersistence() : [];
  for (const pid of pids) process.kill(pid, 'SIGKILL');
  await until('redis-server gone', async () => (await pidsOf('redis-server')).length === 0, 10_000);
  await sleep(downMs);
  if (asRoot) await run('redis-server', [REDIS_CONF, '--daemonize', 'yes', ...persistence], { timeout: 30_000 });
  else await run('/etc/init.d/redis-server', ['start'], { timeout: 30_000 });
  await until('Redis answering', redisAnswers, 30_000);
}

/** The running server's persistence settings as redis-server flags (--dir, --appendonly, …). */
async function redisPersistence(): Promise<string[]> {
  const flags: string[] = [];
  for (const name of ['dir', 'appendonly', 'appendfsync', 'save']) {
    const { stdout } = await run('redis-cli', ['CONFIG', 'GET', name], { timeout: 2000 });
    const [, value] = stdout.split('\n');
    if (value !== undefined) flags.push(`--${name}`, value.trim());
  }
  return flags;
}

function pgCluster(): { version: string; pidFile: string } {
  const version = readdirSync('/etc/postgresql').sort().at(-1)!;
  return { version, pidFile: `/var/lib/postgresql/${version}/main/postmaster.pid` };
}

const pgAnswers = () =>
  run('pg_isready', ['-h', '127.0.0.1', '-q'], { timeout: 3000 }).then(
    () => true,
    () => false,
  );

/** kill -9 of the PostgreSQL postmaster (its backends follow); started again after `downMs`. */
export async function killPostgres(downMs: number): Promise<void> {
  const { version, pidFile } = pgCluster();
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  process.kill(pid, 'SIGKILL');
  // Its backends notice the postmaster's death and exit; a start before they are gone finds
  // their shared memory still in use.
  await until('every postgres process gone', async () => (await pidsOf('postgres')).length === 0, 30_000);
  await sleep(downMs);
  await run('pg_ctlcluster', ['--skip-systemctl-redirect', version, 'main', 'start'], { timeout: 60_000 });
  await until('PostgreSQL answering', pgAnswers, 60_000);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
