/**
 * Redelivery dedupe (R-G2, R-G4): the outcome of each message this node handled, keyed by
 * its producer's idempotency key (or its message id), so an at-least-once redelivery is
 * answered with the earlier result instead of running the handler twice. Bounded by entry
 * count, by an estimate of the bytes it holds, and by age (30 min by default): the oldest
 * entries go first.
 */
export type Outcome = { kind: 'ok'; payload: unknown; headers: Record<string, string> } | { kind: 'rejected'; code: number; reason: string; retryable: false };

export interface DedupeOptions {
  /** Default 10 000 entries. */
  maxEntries?: number;
  /** Default 30 min (R-G4). */
  ttlMs?: number;
  /** Default 64 MiB of remembered results (JSON length as the estimate). */
  maxBytes?: number;
  now?: () => number;
}

interface Entry {
  outcome: Outcome;
  bytes: number;
  expiresAt: number;
}

/** The dedupe key of a delivered message: idempotency keys are unique per producer (R-D5). */
export function dedupeKey(msg: { producer: string; idempotency_key: string | null; message_id: string }): string {
  return msg.idempotency_key ? `key:${msg.producer}:${msg.idempotency_key}` : `id:${msg.message_id}`;
}

function sizeOf(outcome: Outcome): number {
  try {
    return (JSON.stringify(outcome) ?? '').length;
  } catch {
    return 1024;
  }
}

export class DedupeCache {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  private readonly maxEntries: number;
  private readonly ttlMs: number;
  private readonly maxBytes: number;
  private readonly now: () => number;

  constructor(options: DedupeOptions = {}) {
    this.maxEntries = options.maxEntries ?? 10_000;
    this.ttlMs = options.ttlMs ?? 30 * 60_000;
    this.maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
    this.now = options.now ?? Date.now;
  }

  get size(): number {
    return this.entries.size;
  }

  get byteSize(): number {
    return this.bytes;
  }

  get(key: string): Outcome | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.now()) {
      this.remove(key, entry);
      return undefined;
    }
    // Map order is insertion order: re-inserting marks the entry most recently used.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.outcome;
  }

  set(key: string, outcome: Outcome): void {
    const old = this.entries.get(key);
    if (old) this.remove(key, old);
    const bytes = sizeOf(outcome);
    // A single result larger than the whole budget is not remembered at all.
    if (bytes > this.maxBytes) return;
    this.entries.set(key, { outcome, bytes, expiresAt: this.now() + this.ttlMs });
    this.bytes += bytes;
    this.evict();
  }

  delete(key: string): void {
    const entry = this.entries.get(key);
    if (entry) this.remove(key, entry);
  }

  private remove(key: string, entry: Entry): void {
    this.entries.delete(key);
    this.bytes -= entry.bytes;
  }

  private evict(): void {
    const now = this.now();
    for (const [key, entry] of this.entries) {
      const over = this.entries.size > this.maxEntries || this.bytes > this.maxBytes;
      if (!over && entry.expiresAt > now) break;
      this.remove(key, entry);
    }
  }
}
