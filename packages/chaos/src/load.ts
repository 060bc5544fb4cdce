import { newMessageId } from '@reach/core';
import type { ReachClient } from '@reach/sdk';
import type { Ledger } from './ledger.js';

/**
 * Steady load: `rate` submissions a second over HTTP, each a new message with its own
 * idempotency key, as a careful client sends them — a submission refused for a reason that
 * may pass (5xx, 503 while Kafka is away, a timeout) is sent again, the same message (same id,
 * key and created_at), until it is accepted or 30 s have passed. Only an accepted message
 * counts as accepted.
 */
const RETRY_FOR_MS = 30_000;
const RETRY_EVERY_MS = 250;
const MAX_IN_FLIGHT = 256;

/** What a chaos run's load does, whichever way it submits (HTTP here, Kafka in kafka-load.ts). */
export interface SteadyLoad {
  /** What it needs before the first submission (a producer, its registration). */
  open(rate: number): Promise<void>;
  start(rate: number): void;
  /** Stops submitting; resolves when every submission in flight is accepted or given up. */
  stop(): Promise<void>;
}

export class Load implements SteadyLoad {
  private timer: NodeJS.Timeout | undefined;
  private inFlight = 0;
  private sent = 0;
  private started = 0;
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly client: ReachClient,
    private readonly capability: string,
    private readonly run: string,
    private readonly ledger: Ledger,
  ) {}

  async open(): Promise<void> {
    // the test client is ready as it is
  }

  start(rate: number): void {
    this.started = Date.now();
    this.sent = 0;
    this.timer = setInterval(() => {
      const due = Math.floor(((Date.now() - this.started) / 1000) * rate);
      while (this.sent < due && this.inFlight < MAX_IN_FLIGHT) {
        this.sent++;
        const p = this.submit(`chaos-${this.run}-${this.sent}`).finally(() => this.pending.delete(p));
        this.pending.add(p);
      }
    }, 10);
  }

  private async submit(key: string): Promise<void> {
    this.inFlight++;
    const id = newMessageId();
    const sentAt = Date.now();
    try {
      while (Date.now() - sentAt < RETRY_FOR_MS) {
        try {
          const res = await this.client.submit({ message_id: id, created_at: sentAt, capability: this.capability, idempotency_key: key, payload: { key } });
          this.ledger.accept(res.message_id, key, sentAt);
          return;
        } catch (err) {
          const status = (err as { details?: { http_status?: number } }).details?.http_status;
          if (status !== undefined && status < 500 && status !== 429 && status !== 408) break;
          await new Promise((r) => setTimeout(r, RETRY_EVERY_MS));
        }
      }
      this.ledger.refused++;
    } finally {
      this.inFlight--;
    }
  }

  /** Stops submitting; resolves when every submission in flight is accepted or given up. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([...this.pending]);
  }
}
