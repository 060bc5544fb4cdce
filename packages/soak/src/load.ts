import { newMessageId } from '@reach/core';
import type { ReachClient } from '@reach/sdk';

const MAX_IN_FLIGHT = 256;
const RETRY_FOR_MS = 30_000;
const RETRY_EVERY_MS = 250;

export interface Sent {
  id: string;
  sentAt: number;
}

/**
 * Steady load over HTTP: `rate` new messages a second to one capability, each with its own
 * idempotency key (so the keys' storage is part of what is measured). A submission refused
 * for a reason that may pass (5xx, 429, a timeout) is sent again, the same message, for up to
 * 30 s. Accepted messages are queued for the terminal-state check (run.ts), then forgotten,
 * so the soak's own memory does not grow with its length.
 */
export class SoakLoad {
  private timer: NodeJS.Timeout | undefined;
  private inFlight = 0;
  private sent = 0;
  private started = 0;
  private readonly pending = new Set<Promise<void>>();
  readonly accepted: Sent[] = [];
  acceptedTotal = 0;
  refused = 0;
  /** Why submissions were given up: the last error of each, by code or status. */
  readonly refusals: Record<string, number> = {};

  constructor(
    private readonly client: ReachClient,
    private readonly capability: string,
    private readonly run: string,
  ) {}

  start(rate: number): void {
    this.started = Date.now();
    this.timer = setInterval(() => {
      const due = Math.floor(((Date.now() - this.started) / 1000) * rate);
      while (this.sent < due && this.inFlight < MAX_IN_FLIGHT) {
        this.sent++;
        const p = this.submit(`soak-${this.run}-${this.sent}`).finally(() => this.pending.delete(p));
        this.pending.add(p);
      }
    }, 20);
  }

  private async submit(key: string): Promise<void> {
    this.inFlight++;
    const id = newMessageId();
    const sentAt = Date.now();
    let why = 'timeout';
    try {
      while (Date.now() - sentAt < RETRY_FOR_MS) {
        try {
          await this.client.submit({ message_id: id, created_at: sentAt, capability: this.capability, idempotency_key: key, payload: { key, text: 'soak' } });
          this.accepted.push({ id, sentAt });
          this.acceptedTotal++;
          return;
        } catch (err) {
          const e = err as { code?: string | number; details?: { http_status?: number } };
          const status = e.details?.http_status;
          why = `${status ?? '-'} ${e.code ?? (err as Error).name}`;
          if (status !== undefined && status < 500 && status !== 429 && status !== 408) break;
          await new Promise((r) => setTimeout(r, RETRY_EVERY_MS));
        }
      }
      this.refused++;
      this.refusals[why] = (this.refusals[why] ?? 0) + 1;
    } finally {
      this.inFlight--;
    }
  }

  /** The accepted messages sent before `before`, taken off the queue. */
  takeSentBefore(before: number): Sent[] {
    let n = 0;
    while (n < this.accepted.length && this.accepted[n]!.sentAt < before) n++;
    return this.accepted.splice(0, n);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([...this.pending]);
  }
}
