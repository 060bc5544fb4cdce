/**
 * Folds floods of Kafka-ingress refusals (issue #13: refusals don't flood). The ★ contract
 * keeps every refused record out of the silence — each lands in reach.dlq.v1 — but a producer
 * sending thousands of bad records a second must not write thousands of dead letters. Per
 * producer, error code and second the first `sample` refusals are kept in full (dead letter,
 * REJECTED status, receipt); the rest of that second are only counted here, and once the
 * second is over they become ONE dead letter carrying the count (ingress's flood flusher).
 *
 * Pure bookkeeping: no clock of its own, no I/O.
 */
export interface FoldedRefusals {
  readonly producer: string;
  readonly code: number;
  /** The second the refusals fell in, epoch seconds. */
  readonly second: number;
  /** Every refusal of the window, the ones kept in full included. */
  readonly total: number;
  /** The refusals that were counted only: the folded dead letter stands for these. */
  readonly folded: number;
}

interface Window {
  producer: string;
  code: number;
  second: number;
  total: number;
}

/** Windows held at most; a flood of distinct producers is folded into one overflow window. */
const MAX_WINDOWS = 10_000;
/** The producer name windows beyond MAX_WINDOWS are counted under. */
export const OVERFLOW_PRODUCER = '(many producers)';

export class RefusalFlood {
  private readonly windows = new Map<string, Window>();

  /** `sample`: refusals kept in full per producer, code and second (REACH_DLQ_FLOOD_SAMPLE). */
  constructor(private readonly sample: number) {}

  /** Records a refusal: 'full' → write it as usual; 'folded' → write nothing, it is counted. */
  admit(producer: string, code: number, nowMs: number): 'full' | 'folded' {
    const second = Math.floor(nowMs / 1000);
    let key = `${second}|${code}|${producer}`;
    let w = this.windows.get(key);
    if (!w && this.windows.size >= MAX_WINDOWS) {
      key = `${second}|${code}|${OVERFLOW_PRODUCER}`;
      w = this.windows.get(key);
      // A window of the overflow is already past its sample: nothing more to keep in full.
      if (!w) this.windows.set(key, (w = { producer: OVERFLOW_PRODUCER, code, second, total: this.sample }));
    }
    if (!w) this.windows.set(key, (w = { producer, code, second, total: 0 }));
    w.total++;
    return w.total <= this.sample ? 'full' : 'folded';
  }

  /** The windows whose second ended before `nowMs` (all with `all`) that folded something. */
  closed(nowMs: number, all = false): FoldedRefusals[] {
    const current = Math.floor(nowMs / 1000);
    const out: FoldedRefusals[] = [];
    for (const w of this.windows.values()) {
      if (!all && w.second >= current) continue;
      if (w.total > this.sample) out.push({ producer: w.producer, code: w.code, second: w.second, total: w.total, folded: w.total - this.sample });
    }
    return out;
  }

  /** Forgets every window that ended before `nowMs` (all with `all`) except the ones in `keep`. */
  forget(nowMs: number, keep: readonly FoldedRefusals[] = [], all = false): void {
    const current = Math.floor(nowMs / 1000);
    const kept = new Set(keep.map((f) => `${f.second}|${f.code}|${f.producer}`));
    for (const [key, w] of this.windows) if ((all || w.second < current) && !kept.has(key)) this.windows.delete(key);
  }

  get size(): number {
    return this.windows.size;
  }
}
