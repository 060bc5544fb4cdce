/**
 * Everything a chaos run observed from outside: what ingress accepted, what reached an agent,
 * every handler execution per idempotency key, which agent processes were killed. The verdict
 * (verify.ts) is computed from this and the read model.
 */
export interface Accepted {
  readonly key: string;
  readonly sentAt: number;
}

export interface Execution {
  readonly tag: string;
  readonly messageId: string;
  readonly startedAt: number;
  doneAt: number | null;
}

export class Ledger {
  readonly accepted = new Map<string, Accepted>();
  /** message id → first time any agent got it. */
  readonly firstSeen = new Map<string, number>();
  /** Deliveries seen by agents (raw deliveries and SDK handler starts), repeats included. */
  deliveries = 0;
  /** Messages an agent answered (a raw agent's ack, an SDK handler that finished). */
  readonly answered = new Set<string>();
  readonly executions = new Map<string, Execution[]>();
  readonly killedAt = new Map<string, number>();
  /** Submissions ingress never accepted (still refused after the client's retries). */
  refused = 0;

  accept(id: string, key: string, sentAt: number): void {
    this.accepted.set(id, { key, sentAt });
  }

  seen(id: string, at: number): void {
    this.deliveries++;
    if (!this.firstSeen.has(id)) this.firstSeen.set(id, at);
  }

  execution(key: string, messageId: string, tag: string, at: number, done: boolean): void {
    let list = this.executions.get(key);
    if (!list) this.executions.set(key, (list = []));
    if (!done) {
      this.seen(messageId, at);
      list.push({ tag, messageId, startedAt: at, doneAt: null });
      return;
    }
    const open = list.find((e) => e.tag === tag && e.messageId === messageId && e.doneAt === null);
    if (open) open.doneAt = at;
    this.answered.add(messageId);
  }

  killed(tag: string, at: number): void {
    this.killedAt.set(tag, at);
  }

  /**
   * When the pipeline flowed again after a fault at `t`: the last first-delivery among the
   * messages submitted in the `spanMs` after it (they spread over every partition, so the
   * slowest one shows the stalled stage); undefined while one of them has not arrived.
   */
  flowingAgainAt(t: number, spanMs: number): number | undefined {
    let last: number | undefined;
    for (const [id, a] of this.accepted) {
      if (a.sentAt < t || a.sentAt >= t + spanMs) continue;
      const seen = this.firstSeen.get(id);
      if (seen === undefined) return undefined;
      last = Math.max(last ?? seen, seen);
    }
    return last;
  }

  /** The ids of the messages accepted with a send time in [from, to). */
  sentBetween(from: number, to: number): string[] {
    return [...this.accepted].filter(([, a]) => a.sentAt >= from && a.sentAt < to).map(([id]) => id);
  }

  /**
   * Send → first delivery of the messages submitted in [from, to) that reached an agent: the
   * worst wait a fault caused; and how many never reached one (they ended DEAD). Counting those
   * as waiting until the report made the column read "694 s" for a fault whose messages were
   * all delivered within seconds, next to some that died.
   */
  maxWait(from: number, to: number): { maxWaitMs: number; neverDelivered: number } {
    let maxWaitMs = 0;
    let neverDelivered = 0;
    for (const [id, a] of this.accepted) {
      if (a.sentAt < from || a.sentAt >= to) continue;
      const seen = this.firstSeen.get(id);
      if (seen === undefined) neverDelivered++;
      else maxWaitMs = Math.max(maxWaitMs, seen - a.sentAt);
    }
    return { maxWaitMs, neverDelivered };
  }
}
