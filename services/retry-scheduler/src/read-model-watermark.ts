import { committedOffsets, endOffsets, type Admin, type Kafka, type PartitionOffsets } from '@reach/kafka';

/**
 * How far the tracker's read model (`messages` in PostgreSQL) is known to be complete. The
 * stuck sweep reads that table; while the tracker lags (killed and restarting, or behind a
 * burst), a message that was DELIVERED long ago can still show DELIVERING there, and declaring
 * it DEAD would be a lie. So every sweep takes a snapshot of the status topics' end offsets,
 * and the read model is complete up to the time of the latest snapshot the tracker's committed
 * offsets have passed on every partition: every status event produced before that time is in
 * PostgreSQL (the tracker commits an offset only after its rows are written). A message may be
 * declared DEAD only when its deadline is no later than that time.
 */

export interface Snapshot {
  readonly at: number;
  readonly ends: PartitionOffsets;
}

/**
 * True when the group's committed offsets reach the snapshot's end offsets everywhere: an
 * empty partition (end 0) needs nothing; a partition with records needs a commit at its end.
 */
export function covers(committed: PartitionOffsets, ends: PartitionOffsets): boolean {
  for (const [tp, end] of ends) {
    if (end === 0n) continue;
    const c = committed.get(tp);
    if (c === undefined || c < end) return false;
  }
  return true;
}

/** The time of the latest snapshot the committed offsets cover; -Infinity when none does. */
export function completeUntil(snapshots: readonly Snapshot[], committed: PartitionOffsets): number {
  let until = Number.NEGATIVE_INFINITY;
  for (const s of snapshots) if (s.at > until && covers(committed, s.ends)) until = s.at;
  return until;
}

export interface OffsetReader {
  /** End offsets (high watermarks) of the topics. */
  ends(): Promise<PartitionOffsets>;
  /** The group's committed offsets on the topics (absent: none committed). */
  committed(): Promise<PartitionOffsets>;
}

export class ReadModelWatermark {
  private snapshots: Snapshot[] = [];

  /** @param keepMs how long snapshots are kept: a tracker lagging longer holds the sweep until it catches up to one. */
  constructor(
    private readonly reader: OffsetReader,
    private readonly keepMs: number,
  ) {}

  /**
   * Takes a snapshot at `now` and answers until when the read model is complete. Throws when
   * Kafka cannot be asked (the sweep then skips its round).
   */
  async observe(now: number): Promise<number> {
    // Committed first, then ends: a commit landing in between can only make the answer older.
    const committed = await this.reader.committed();
    const ends = await this.reader.ends();
    this.snapshots = this.snapshots.filter((s) => now - s.at <= this.keepMs);
    this.snapshots.push({ at: now, ends });
    return completeUntil(this.snapshots, committed);
  }
}

/** Reads the offsets through a kafkajs admin client (connected on first use). */
export class KafkaOffsetReader implements OffsetReader {
  private admin: Admin | undefined;

  constructor(
    private readonly kafka: Kafka,
    private readonly groupId: string,
    private readonly topics: readonly string[],
  ) {}

  private async client(): Promise<Admin> {
    if (!this.admin) {
      const admin = this.kafka.admin();
      await admin.connect();
      this.admin = admin;
    }
    return this.admin;
  }

  async ends(): Promise<PartitionOffsets> {
    return endOffsets(await this.client(), this.topics);
  }

  async committed(): Promise<PartitionOffsets> {
    return committedOffsets(await this.client(), this.groupId, this.topics);
  }

  async close(): Promise<void> {
    await this.admin?.disconnect();
    this.admin = undefined;
  }
}
