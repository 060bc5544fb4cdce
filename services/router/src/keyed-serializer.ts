/**
 * Runs tasks with the same key one after another, in call order, and tasks with different
 * keys concurrently. The router handles several records of a batch at once; records of one
 * session share a key (the record key is session_id ?? message_id), and stickiness needs each
 * to see the binding the previous one wrote.
 */
export class KeyedSerializer {
  private readonly tails = new Map<string, Promise<void>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key);
    const result = previous ? previous.then(task) : task();
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  get pending(): number {
    return this.tails.size;
  }
}
