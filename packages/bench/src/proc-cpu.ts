import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * CPU time and memory of the stack's processes, read from /proc: the only figures that say
 * what a message costs the machine, whatever each service reports about itself. A snapshot
 * is cheap (~30 small files), so one is taken around every measured window; the difference of
 * two is the CPU each component used in between.
 */

/** The components a stack is made of, as the tables name them. */
export type Component = string;

export interface ProcSample {
  pid: number;
  component: Component;
  /** The process title, for the per-process idle table (PostgreSQL backends say what they are). */
  label: string;
  /** Clock ticks since the process started: a pid reused by a new process is not the same process. */
  startTicks: number;
  /** utime + stime (+ reaped children's for the postmaster, see parseStat's caller), in ticks. */
  cpuTicks: number;
}

export interface CpuSnapshot {
  /** performance.now() when taken. */
  atMs: number;
  procs: Map<number, ProcSample>;
}

/** USER_HZ: the unit of /proc/<pid>/stat's times (100 on every Linux this runs on). */
export const CLK_TCK = (() => {
  try {
    const n = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return Number.isFinite(n) && n > 0 ? n : 100;
  } catch {
    return 100;
  }
})();

export interface StatFields {
  ppid: number;
  utime: number;
  stime: number;
  cutime: number;
  cstime: number;
  startTicks: number;
}

/**
 * /proc/<pid>/stat: the command name is in parentheses and may itself contain spaces or
 * parentheses, so fields are counted from the last ')'. Field 14 is utime, 15 stime, 16
 * cutime, 17 cstime, 22 starttime (1-based, proc(5)).
 */
export function parseStat(text: string): StatFields | undefined {
  const close = text.lastIndexOf(')');
  if (close < 0) return undefined;
  const f = text
    .slice(close + 2)
    .trim()
    .split(' ');
  // f[0] is field 3 (state): field n is f[n - 3].
  const at = (n: number) => Number(f[n - 3]);
  const out = { ppid: at(4), utime: at(14), stime: at(15), cutime: at(16), cstime: at(17), startTicks: at(22) };
  return Object.values(out).every(Number.isFinite) ? out : undefined;
}

/**
 * Which stack component a process is, from its command line (NUL-separated argv joined with
 * spaces), or undefined when it is not part of the stack. Services are the node processes
 * running `services/<name>/dist/main.js`; the supervisor (`reach up`) counts too, since every
 * service's log lines go through its pipes.
 */
export function componentOf(cmdline: string): Component | undefined {
  const service = /services\/([a-z0-9-]+)\/dist\/main\.js/.exec(cmdline);
  if (service) return service[1];
  if (cmdline.includes('dev-schema-registry')) return 'schema-registry';
  if (/\bjava\b/.test(cmdline) && cmdline.includes('kafka.Kafka')) return 'kafka';
  if (/(^|\/)redis-server\b/.test(cmdline)) return 'redis';
  // The postmaster's argv[0] is its binary; backends and workers retitle themselves "postgres: …".
  if (/^(\S*\/)?postgres(:|\s|$)/.test(cmdline)) return 'postgres';
  if (/cli\/dist\/bin\.js up\b/.test(cmdline)) return 'supervisor';
  return undefined;
}

/** The command line without the repo's path and the node flags: `node services/router/dist/main.js`. */
export function shortLabel(cmdline: string): string {
  const kafka = cmdline.indexOf('kafka.Kafka');
  if (kafka >= 0) return `java … ${cmdline.slice(kafka).replace(/\S*\//g, '')}`.slice(0, 80);
  return cmdline
    .replace(/^\S*\/node( --\S+)*/, 'node')
    .replace(/\S*\/(services|packages)\//, '$1/')
    .slice(0, 80);
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined; // the process ended while we looked
  }
}

/**
 * Which processes are the stack. A machine can run a second stack beside the default one
 * (`REACH_HOME`, other ports): with the measured stack's supervisor known (its
 * `state.json`), only the supervisor and its descendants count, plus the shared PostgreSQL and
 * Redis. Without it, every matching process does.
 */
export interface ProcScope {
  supervisorPid?: number;
}

/** PostgreSQL and Redis are the machine's, not started by `reach up`: always counted. */
const SHARED = new Set(['postgres', 'redis']);

/** The scope of the stack whose REACH_HOME is `home`: its running supervisor, if any. */
export function stackScope(home: string): ProcScope {
  try {
    const { supervisorPid } = JSON.parse(readFileSync(join(home, 'state.json'), 'utf8')) as { supervisorPid?: unknown };
    if (typeof supervisorPid === 'number' && componentOf((readText(`/proc/${supervisorPid}/cmdline`) ?? '').replace(/\0/g, ' ')) === 'supervisor') {
      return { supervisorPid };
    }
  } catch {
    // no state file: no stack started from this home, count every stack-like process
  }
  return {};
}

function descendsFrom(pid: number, root: number, ppidOf: (pid: number) => number | undefined): boolean {
  for (let p: number | undefined = pid, hops = 0; p !== undefined && p > 1 && hops < 16; p = ppidOf(p), hops++) if (p === root) return true;
  return false;
}

/** Every stack process with its CPU ticks so far. The bench itself is never part of it. */
export function cpuSnapshot(scope: ProcScope = {}): CpuSnapshot {
  const procs = new Map<number, ProcSample>();
  const ppids = new Map<number, number>();
  const ppidOf = (pid: number) => ppids.get(pid) ?? parseStat(readText(`/proc/${pid}/stat`) ?? '')?.ppid;
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    const raw = readText(`/proc/${pid}/cmdline`);
    if (!raw) continue; // kernel threads have no command line
    const cmdline = raw.replace(/\0+$/, '').replace(/\0/g, ' ');
    const component = componentOf(cmdline);
    if (!component) continue;
    const stat = parseStat(readText(`/proc/${pid}/stat`) ?? '');
    if (!stat) continue;
    ppids.set(pid, stat.ppid);
    if (scope.supervisorPid !== undefined && !SHARED.has(component) && !descendsFrom(pid, scope.supervisorPid, ppidOf)) continue;
    // PostgreSQL forks a backend per connection and the postmaster reaps the ones that end: their
    // CPU shows up in its cutime/cstime, so counting those keeps short-lived backends' work.
    // Nowhere else: a restarted service's whole life would land in the supervisor's.
    const children = component === 'postgres' ? stat.cutime + stat.cstime : 0;
    procs.set(pid, { pid, component, label: shortLabel(cmdline), startTicks: stat.startTicks, cpuTicks: stat.utime + stat.stime + children });
  }
  return { atMs: performance.now(), procs };
}

export interface CpuUse {
  /** Wall seconds between the two snapshots. */
  seconds: number;
  /** CPU seconds per component. */
  byComponent: Map<Component, number>;
  /** CPU seconds per process (idle table). */
  byProcess: Array<{ pid: number; component: Component; label: string; cpuS: number }>;
  /** Components a process of which started or ended in between (a restart: figures are suspect). */
  churned: Set<Component>;
}

/** PostgreSQL's backends and workers (retitled "postgres: …") start and end by design; its postmaster does not. */
function comesAndGoes(p: ProcSample): boolean {
  return p.component === 'postgres' && p.label.startsWith('postgres:');
}

/** Components of COMPONENT_ORDER with no process in the snapshot (down, or restarting). */
export function absentComponents(snapshot: CpuSnapshot): Component[] {
  const present = new Set([...snapshot.procs.values()].map((p) => p.component));
  return COMPONENT_ORDER.filter((c) => !present.has(c));
}

/**
 * CPU used between two snapshots. A process present in both counts its difference; one that
 * started in between counts everything it used (all of it is inside the window); one that ended
 * is lost, and its component is reported as churned — except PostgreSQL backends, which come
 * and go by design and whose CPU the postmaster collects (the postmaster itself does count).
 */
export function cpuBetween(before: CpuSnapshot, after: CpuSnapshot): CpuUse {
  const byComponent = new Map<Component, number>();
  const byProcess: CpuUse['byProcess'] = [];
  const churned = new Set<Component>();
  for (const p of after.procs.values()) {
    const b = before.procs.get(p.pid);
    const same = b !== undefined && b.startTicks === p.startTicks;
    const ticks = same ? p.cpuTicks - b.cpuTicks : p.cpuTicks;
    if (!same && !comesAndGoes(p)) churned.add(p.component);
    const cpuS = Math.max(0, ticks) / CLK_TCK;
    byComponent.set(p.component, (byComponent.get(p.component) ?? 0) + cpuS);
    byProcess.push({ pid: p.pid, component: p.component, label: p.label, cpuS });
  }
  for (const b of before.procs.values()) {
    const a = after.procs.get(b.pid);
    if ((!a || a.startTicks !== b.startTicks) && !comesAndGoes(b)) churned.add(b.component);
  }
  return { seconds: (after.atMs - before.atMs) / 1000, byComponent, byProcess, churned };
}

/**
 * Resident memory (VmRSS, MiB) per component, summed over its processes, and how many there
 * are (`reach up --instances N` runs every service N times; PostgreSQL has a backend per connection).
 */
export function memoryByComponent(scope: ProcScope = {}): { rssMiB: Record<Component, number>; processes: Record<Component, number> } {
  const rssMiB: Record<Component, number> = {};
  const processes: Record<Component, number> = {};
  for (const p of cpuSnapshot(scope).procs.values()) {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(readText(`/proc/${p.pid}/status`) ?? '');
    if (!m) continue;
    rssMiB[p.component] = (rssMiB[p.component] ?? 0) + Number(m[1]) / 1024;
    processes[p.component] = (processes[p.component] ?? 0) + 1;
  }
  return { rssMiB, processes };
}

/** The order components are listed in: the pipeline's stages first, then what they stand on. */
export const COMPONENT_ORDER = [
  'ingress',
  'router',
  'dispatcher',
  'tracker',
  'registry',
  'retry-scheduler',
  'dead-letter',
  'console',
  'supervisor',
  'kafka',
  'schema-registry',
  'postgres',
  'redis',
];

export function byComponentOrder(a: Component, b: Component): number {
  const rank = (c: Component) => {
    const i = COMPONENT_ORDER.indexOf(c);
    return i < 0 ? COMPONENT_ORDER.length : i;
  };
  return rank(a) - rank(b) || a.localeCompare(b);
}
