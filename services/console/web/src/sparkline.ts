/**
 * Sparklines: the last N values of a series as one SVG path (pure: unit-tested). The y range is
 * fixed when the series has a natural one (QoS and load rate are in [0, 1]) so two agents'
 * lines can be compared by eye; otherwise it spans the data.
 */
export interface SparklineOptions {
  width: number;
  height: number;
  min?: number;
  max?: number;
  /** Inset so the stroke is not clipped at the edges. */
  pad?: number;
}

export function sparklinePoints(values: readonly number[], o: SparklineOptions): Array<[number, number]> {
  if (values.length === 0) return [];
  const pad = o.pad ?? 1;
  const lo = o.min ?? Math.min(...values);
  const hi = o.max ?? Math.max(...values);
  const span = hi - lo || 1;
  const w = o.width - 2 * pad;
  const h = o.height - 2 * pad;
  const step = values.length > 1 ? w / (values.length - 1) : 0;
  return values.map((v, i) => {
    const clamped = Math.min(hi, Math.max(lo, v));
    const x = values.length > 1 ? pad + i * step : pad + w;
    const y = pad + h - ((clamped - lo) / span) * h;
    return [round(x), round(y)];
  });
}

export function sparklinePath(values: readonly number[], o: SparklineOptions): string {
  const pts = sparklinePoints(values, o);
  if (pts.length === 0) return '';
  // One sample: a short flat tick ending at the right edge, so it still shows.
  if (pts.length === 1) {
    const [x, y] = pts[0]!;
    return `M${round(Math.max(0, x - 4))},${y}L${x},${y}`;
  }
  return pts.map(([x, y], i) => `${i === 0 ? 'M' : 'L'}${x},${y}`).join('');
}

export type Trend = 'up' | 'down' | 'flat';

/** Direction of the series: the mean of its last third against the mean of its first third. */
export function trendOf(values: readonly number[], epsilon = 0.02): Trend {
  if (values.length < 2) return 'flat';
  const third = Math.max(1, Math.floor(values.length / 3));
  const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const d = mean(values.slice(-third)) - mean(values.slice(0, third));
  return d > epsilon ? 'up' : d < -epsilon ? 'down' : 'flat';
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}
