/** Human output of the CLI: progress lines on stderr, tables and JSON on stdout. */
export function step(msg: string): void {
  process.stderr.write(`▸ ${msg}\n`);
}

export function done(msg: string): void {
  process.stderr.write(`✔ ${msg}\n`);
}

export function warn(msg: string): void {
  process.stderr.write(`! ${msg}\n`);
}

export function table(rows: ReadonlyArray<Record<string, unknown>>, columns?: string[]): string {
  if (rows.length === 0) return '(none)\n';
  const cols = columns ?? Object.keys(rows[0]!);
  const cell = (v: unknown) => (v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[]) =>
    vals
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(cols.map((c) => c.toUpperCase())), ...rows.map((r) => line(cols.map((c) => cell(r[c]))))].join('\n') + '\n';
}

/** A ticking progress line for long steps (the first Kafka download, readiness waits). */
export async function withProgress<T>(label: string, work: Promise<T>): Promise<T> {
  const started = Date.now();
  const tty = process.stderr.isTTY;
  const timer = setInterval(() => {
    const s = Math.round((Date.now() - started) / 1000);
    if (tty) process.stderr.write(`\r▸ ${label} … ${s}s`);
    else if (s % 10 === 0) process.stderr.write(`▸ ${label} … ${s}s\n`);
  }, 1000);
  try {
    const out = await work;
    if (tty) process.stderr.write('\r\x1b[K');
    done(`${label} (${((Date.now() - started) / 1000).toFixed(1)}s)`);
    return out;
  } finally {
    clearInterval(timer);
  }
}
