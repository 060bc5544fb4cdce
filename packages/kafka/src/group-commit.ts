/**
 * Group commit: callers add their items and wait; one write runs at a time, and everything added
 * while it runs goes out together in the next. Each caller's promise settles with the write that
 * took its items (resolved once they are stored, rejected with that write's error).
 *
 * The batch stage (`together`) hands a fetch's partition batches to its handler this way, and
 * the tracker writes its PostgreSQL rows this way. Why the tracker does: a message's four
 * status events travel in packs of different stages, so they sit on different partitions of
 * reach.status-batches.v1, and a write per partition batch stored each message's row up to four
 * times (a non-HOT update touching every index of `messages` each time). Written together, the events of one message fold into one
 * upsert far more often, and PostgreSQL commits one transaction instead of one per partition.
 */
export class GroupCommit<T> {
  private pending: { items: T[]; waiters: Array<{ resolve: () => void; reject: (err: unknown) => void }> } | undefined;
  private writing = false;
  private scheduled = false;

  constructor(private readonly write: (items: T[]) => Promise<void>) {}

  add(items: readonly T[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending ??= { items: [], waiters: [] };
      this.pending.items.push(...items);
      this.pending.waiters.push({ resolve, reject });
      this.schedule();
    });
  }

  /**
   * The first write waits for the current macrotask to end: the partition batches of one fetch
   * are handed over in the same tick (after their decode's microtasks), so they share it.
   */
  private schedule(): void {
    if (this.writing || this.scheduled || !this.pending) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    const group = this.pending;
    if (this.writing || !group) return;
    this.pending = undefined;
    this.writing = true;
    this.write(group.items).then(
      () => this.settle(() => group.waiters.forEach((w) => w.resolve())),
      (err: unknown) => this.settle(() => group.waiters.forEach((w) => w.reject(err))),
    );
  }

  private settle(notify: () => void): void {
    this.writing = false;
    notify();
    this.schedule();
  }
}

/**
 * A call gathered with the others made in the same macrotask, each caller getting its own
 * answer: `call` takes every item added in that macrotask and returns one answer per item, in
 * order. Unlike GroupCommit, runs do not wait for each other: a run may start while the last is
 * still answering. The dispatcher's acks take their deliveries from Redis this way (one script
 * per agent for the acks of one socket read, not one per ack), and the router writes its
 * decision memo: serialised like GroupCommit, the acks of the next socket read waited for the
 * previous call while Redis was slow, and slots freed later (`pnpm bench --mix`, HIGH p99 while
 * the flood arrives: 167–267 ms against 139–194 before the batching).
 */
export class BatchedCall<T, R> {
  private pending: Array<{ item: T; resolve: (r: R) => void; reject: (err: unknown) => void }> | undefined;

  constructor(private readonly call: (items: T[]) => Promise<R[]>) {}

  add(item: T): Promise<R> {
    return new Promise((resolve, reject) => {
      if (!this.pending) {
        this.pending = [];
        setImmediate(() => this.run());
      }
      this.pending.push({ item, resolve, reject });
    });
  }

  private run(): void {
    const group = this.pending ?? [];
    this.pending = undefined;
    this.call(group.map((g) => g.item)).then(
      (answers) => group.forEach((g, i) => g.resolve(answers[i]!)),
      (err: unknown) => group.forEach((g) => g.reject(err)),
    );
  }
}
