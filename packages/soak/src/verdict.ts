import type { RssSplit, Sample } from './sampler.js';

/** RSS growth allowed after warm-up, and storage growth allowed once retention drops data. */
export const FLAT_WITHIN = 0.1;
/** Below this, a size change is noise (a page, a B-tree split), not growth. */
export const STORAGE_SLACK_BYTES = 1024 * 1024;

export interface GrowthCheck {
  /** null: the run was too short to tell (too few samples in the window). */
  ok: boolean | null;
  detail: string;
}

export interface Verdict {
  /** Accepted messages checked in the read model, and how many were not terminal in time. */
  checked: number;
  notTerminal: number;
  byStatus: Record<string, number>;
  /** Agents (all healthy: they fail a few %) whose circuit was seen open. */
  circuitsOpened: { stable: string[]; transient: string[] };
  rss: GrowthCheck;
  postgres: GrowthCheck;
  redis: GrowthCheck;
  /** Every check passed (a check that could not tell counts as failed). */
  ok: boolean;
}

const mib = (n: number) => `${(n / 1048576).toFixed(1)} MiB`;

/** Per process, (max − min) / min of its RSS over the samples at or after `warmupS`. */
export function rssFlat(samples: readonly Sample[], warmupS: number): GrowthCheck {
  const after = samples.filter((s) => s.atS >= warmupS);
  if (after.length < 2) return { ok: null, detail: `fewer than 2 samples after the ${warmupS} s warm-up` };
  let worst = { name: '', growth: 0 };
  for (const name of Object.keys(after[0]!.rss)) {
    const xs = after.map((s) => s.rss[name] ?? 0).filter((x) => x > 0);
    if (xs.length < 2) continue;
    const growth = (Math.max(...xs) - Math.min(...xs)) / Math.min(...xs);
    if (growth > worst.growth) worst = { name, growth };
  }
  return {
    ok: worst.growth <= FLAT_WITHIN,
    detail: `largest RSS spread after warm-up: ${worst.name || '-'} ${(worst.growth * 100).toFixed(1)} %${worst.name ? splitRange(after, worst.name) : ''}`,
  };
}

/** Where a process's RSS moved: the ranges of its private, file-backed and huge-page parts. */
function splitRange(samples: readonly Sample[], name: string): string {
  const parts = samples.map((s) => s.rssSplit?.[name]).filter((p): p is RssSplit => p !== undefined && p.anon + p.file > 0);
  if (parts.length < 2) return '';
  const range = (f: (p: RssSplit) => number) => {
    const xs = parts.map(f);
    return `${(Math.min(...xs) / 1048576).toFixed(1)}–${(Math.max(...xs) / 1048576).toFixed(1)} MiB`;
  };
  return ` (private ${range((p) => p.anon)}, of it huge pages ${range((p) => p.anonHuge)}; file-backed ${range((p) => p.file)})`;
}

/**
 * A size levels off once retention drops data: over the samples from `fromS` on, the peak of
 * the second half is at most 10 % (plus 1 MiB) above the peak of the first half. Peaks, not
 * means: partitions dropped whole make a sawtooth, whose means depend on where a half starts.
 */
export function levelsOff(samples: readonly Sample[], fromS: number, size: (s: Sample) => number, what: string): GrowthCheck {
  const after = samples.filter((s) => s.atS >= fromS).map(size);
  if (after.length < 2) return { ok: null, detail: `${what}: fewer than 2 samples after retention starts dropping (${fromS} s): run longer` };
  const half = Math.floor(after.length / 2);
  const first = Math.max(...after.slice(0, half));
  const second = Math.max(...after.slice(after.length - half));
  return {
    ok: second <= first * (1 + FLAT_WITHIN) + STORAGE_SLACK_BYTES,
    detail: `${what}: ${mib(first)} → ${mib(second)} (peaks of the first and second half from ${fromS} s)`,
  };
}
