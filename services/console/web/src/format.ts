/** Number and time formatting for the page (pure: unit-tested). */

export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return '–';
  const abs = Math.abs(ms);
  if (abs === 0) return '0 ms';
  if (abs < 1) return `${ms.toFixed(2)} ms`;
  if (abs < 999.5) return `${Math.round(ms)} ms`;
  if (abs < 60_000) return `${(ms / 1000).toFixed(abs < 10_000 ? 2 : 1)} s`;
  if (abs < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(ms / 3_600_000)} h ${Math.round((ms % 3_600_000) / 60_000)} min`;
}

/** "4 s ago", "in 25 s" — for lease expiry and "last updated". */
export function formatRelative(atMs: number, nowMs: number): string {
  const d = atMs - nowMs;
  const text = formatDuration(Math.abs(d)).replace(/\.\d+ s$/, ' s');
  if (Math.abs(d) < 1000) return 'now';
  return d < 0 ? `${text} ago` : `in ${text}`;
}

/** Local wall-clock time with milliseconds: what an operator compares with logs. */
export function formatClock(atMs: number): string {
  const d = new Date(atMs);
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export function formatCount(n: number): string {
  return n.toLocaleString('en-US');
}

export function formatRate(perS: number | null): string {
  if (perS === null || !Number.isFinite(perS)) return '–';
  if (perS === 0) return '0/s';
  if (perS < 10) return `${perS.toFixed(1)}/s`;
  return `${Math.round(perS).toLocaleString('en-US')}/s`;
}

export function formatPercent(ratio: number): string {
  return `${Math.round(ratio * 100)} %`;
}
