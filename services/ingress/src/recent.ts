import type { EventRow, MessageRow } from './read-model.js';

interface Entry {
  readonly message: MessageRow;
  readonly events: EventRow[];
  readonly until: number;
}

/**
 * What this instance itself just reported about the messages it accepted or refused, kept for
 * a short while. The tracker writes the read model a few hundred milliseconds behind the
 * status topic; a sender that submits and at once asks `GET /v1/messages/{id}` is answered
 * from here instead of with a 404. The read model always wins once it has the message.
 * Bounded in size and age: oldest entries go first.
 */
export class RecentMessages {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly maxEntries = 10_000,
    private readonly ttlMs = 120_000,
  ) {}

  remember(message: MessageRow, event: EventRow, now: number = Date.now()): void {
    this.entries.delete(message.message_id);
    this.entries.set(message.message_id, { message, events: [event], until: now + this.ttlMs });
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.entries.delete(oldest);
    }
  }

  get(messageId: string, now: number = Date.now()): { message: MessageRow; events: EventRow[] } | undefined {
    const e = this.entries.get(messageId);
    if (!e) return undefined;
    if (e.until <= now) {
      this.entries.delete(messageId);
      return undefined;
    }
    return e;
  }

  get size(): number {
    return this.entries.size;
  }
}
