import type { Logger } from '@reach/core';
import type { Presence, SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type OutRecord } from '@reach/kafka';

const PRESENCE_SUBJECT = valueSubject(TOPICS.presence.name);

/** A reach.presence.v1 record (compacted, key agent_id): where the agent's socket is, or that it has none. */
export function presenceRecord(
  codec: SchemaCodec,
  p: { agentId: string; connected: boolean; instance: string; connectionId: string },
  now: number = Date.now(),
): OutRecord {
  const value: Presence = { agent_id: p.agentId, connected: p.connected, dispatcher_instance: p.instance, connection_id: p.connectionId, at: now };
  return { topic: TOPICS.presence.name, key: p.agentId, value: codec.encode(PRESENCE_SUBJECT, value) };
}

/** How long a presence change that could not be produced waits before it is tried again. */
export const PRESENCE_RETRY_MS = 1_000;

/**
 * Presence changes, never dropped: the router routes only to agents whose presence says
 * connected, so a lost "connected" (produced while the broker restarts, after the producer's own
 * retries gave up) left a connected agent unroutable — REJECTED 2001 "no live agent" — until it
 * reconnected. Each agent's latest change is kept until it is on the topic; a failed send is
 * tried again every PRESENCE_RETRY_MS, and a newer change of the same agent replaces the older
 * one waiting (views keep the newest by its `at`, so only the latest matters).
 */
export class PresenceFeed {
  private readonly waiting = new Map<string, OutRecord>();
  private inFlight: Promise<void> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private failing = false;
  private closed = false;

  constructor(
    private readonly send: (records: readonly OutRecord[]) => Promise<void>,
    private readonly log: Logger,
    private readonly retryMs: number = PRESENCE_RETRY_MS,
  ) {}

  publish(agentId: string, record: OutRecord): void {
    this.waiting.set(agentId, record);
    this.kick();
  }

  /** Changes not yet on the topic. */
  get pending(): number {
    return this.waiting.size;
  }

  /** Shutdown: sends what is waiting once more (the disconnects of the closed sockets), then stops retrying. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    while (this.inFlight) await this.inFlight;
    if (this.waiting.size > 0) await this.flush();
  }

  private kick(): void {
    if (this.inFlight || this.retryTimer || this.waiting.size === 0) return;
    this.inFlight = this.flush().finally(() => {
      this.inFlight = undefined;
      if (!this.closed) this.kick();
    });
  }

  private async flush(): Promise<void> {
    const batch = new Map(this.waiting);
    this.waiting.clear();
    try {
      await this.send([...batch.values()]);
      if (this.failing) this.log.info({ agents: batch.size }, 'presence changes produced again');
      this.failing = false;
    } catch (err) {
      for (const [agent, record] of batch) if (!this.waiting.has(agent)) this.waiting.set(agent, record);
      if (this.closed) {
        this.log.warn({ err, agents: this.waiting.size }, 'presence changes not produced at shutdown');
        return;
      }
      if (!this.failing) this.log.warn({ err, agents: this.waiting.size }, `presence changes not produced; trying again every ${this.retryMs} ms`);
      this.failing = true;
      this.retryTimer = setTimeout(() => {
        this.retryTimer = undefined;
        this.kick();
      }, this.retryMs);
      this.retryTimer.unref();
    }
  }
}
