import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConsumerLag } from '@reach/bench';
import { kafkaStorage } from '@reach/cli';
import type { Admin } from '@reach/kafka';
import { pgStorage, redisStorage, type Pool, type Redis } from '@reach/store';

/** One minute's look at the stack (every size in bytes). */
export interface Sample {
  /** Seconds since the load started. */
  atS: number;
  /** RSS of every process of the stack (its supervisor's state.json), by name. */
  rss: Record<string, number>;
  /** The same RSS split by what backs it: a leak can only grow `anon`, see `RssSplit`. */
  rssSplit: Record<string, RssSplit>;
  /** PostgreSQL total (data + indexes) by table, partitions folded in. */
  pg: Record<string, number>;
  pgIndexes: number;
  pgTotal: number;
  /** INFO used_memory: the whole Redis server (shared with anything else on it). */
  redisUsedMemory: number;
  /** MEMORY USAGE summed over this stack's database: what Agent-Reach's own keys take. */
  redisDbBytes: number;
  redisKeys: number;
  /** Keys of this database without a TTL. */
  redisKeysWithoutTtl: number;
  kafkaLogBytes: number | null;
  /** null: the broker could not tell this time. */
  consumerLag: number | null;
  /** Agents whose circuit is not CLOSED. */
  openCircuits: string[];
  accepted: number;
  terminal: number;
}

/**
 * A process's resident memory by what backs it (bytes). `anon` is private memory (heaps,
 * malloc): where a leak shows. `file` is pages of mapped files, for a Node service mostly its
 * own binary, touched as more of its code runs: bounded by the binary's size, shared with every
 * other process of the same binary, and dropped by the kernel under pressure. `anonHuge` is the
 * part of `anon` in transparent huge pages, which the kernel may fill in 2 MiB at a time.
 */
export interface RssSplit {
  anon: number;
  file: number;
  anonHuge: number;
}

const kB = (text: string, field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0) * 1024;
const readOr = (path: string) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
};

/** VmRSS of a process in bytes (0 when it is gone). */
export function rssOf(pid: number): number {
  return kB(readOr(`/proc/${pid}/status`), 'VmRSS');
}

/** The split of a process's RSS (zeros when it is gone). */
export function rssSplitOf(pid: number): RssSplit {
  const status = readOr(`/proc/${pid}/status`);
  return { anon: kB(status, 'RssAnon'), file: kB(status, 'RssFile'), anonHuge: kB(readOr(`/proc/${pid}/smaps_rollup`), 'AnonHugePages') };
}

/** The stack's processes as its supervisor recorded them (`reach up`'s state.json). */
export function stackProcesses(home: string): Array<{ name: string; pid: number }> {
  try {
    const state = JSON.parse(readFileSync(join(home, 'state.json'), 'utf8')) as { processes: Array<{ name: string; pid?: number | null }> };
    return state.processes.filter((p): p is { name: string; pid: number } => typeof p.pid === 'number');
  } catch {
    return [];
  }
}

export class Sampler {
  private readonly lag: ConsumerLag;

  constructor(private readonly deps: { pg: Pool; redis: Redis; admin: Admin; brokers: readonly string[]; home: string }) {
    this.lag = new ConsumerLag(deps.admin);
  }

  async sample(atS: number, counts: { accepted: number; terminal: number }): Promise<Sample> {
    const { pg, redis, brokers, home } = this.deps;
    const rss: Record<string, number> = {};
    const rssSplit: Record<string, RssSplit> = {};
    for (const p of stackProcesses(home)) {
      rss[p.name] = rssOf(p.pid);
      rssSplit[p.name] = rssSplitOf(p.pid);
    }
    const tables = await pgStorage(pg);
    const r = await redisStorage(redis, { scan: true });
    const kafka = await kafkaStorage(brokers, home).catch(() => ({ logBytes: null }));
    // a busy or restarting broker ("coordinator is loading") costs this sample its lag, not the run
    const lag = await this.lag
      .discover()
      .then(() => this.lag.read())
      .catch(() => ({ total: null }));
    const open = await redis.zrange('reach:circuits', 0, -1);
    return {
      atS,
      rss,
      rssSplit,
      pg: Object.fromEntries(tables.map((t) => [t.table, t.totalBytes])),
      pgIndexes: tables.reduce((n, t) => n + t.indexBytes, 0),
      pgTotal: tables.reduce((n, t) => n + t.totalBytes, 0),
      redisUsedMemory: r.usedMemory,
      redisDbBytes: (r.patterns ?? []).reduce((n, p) => n + p.bytes, 0),
      redisKeys: r.keys,
      redisKeysWithoutTtl: (r.patterns ?? []).reduce((n, p) => n + p.withoutTtl, 0),
      kafkaLogBytes: kafka.logBytes,
      consumerLag: lag.total,
      openCircuits: open,
      ...counts,
    };
  }
}
