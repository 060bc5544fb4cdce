import { ReachError, type Logger } from '@reach/core';
import type { AgentRecord, SchemaCodec } from '@reach/envelope';
import { TOPICS, produceAll, valueSubject, type OutRecord, type Producer } from '@reach/kafka';
import type { AgentStore } from './agent-store.js';

const AGENTS_SUBJECT = valueSubject(TOPICS.agents.name);
const RETRY_AFTER_FAILURE_MS = 1000;

/**
 * The registry's change feed on the compacted reach.agents.v1 (R-A6): key agent_id,
 * value the AgentRecord, a tombstone (null) once the agent is gone.
 *
 * Callers say WHICH agent changed; the feed publishes its state as Redis holds it at send
 * time. So the feed converges on Redis whatever the order of concurrent requests: the last
 * record produced for an agent is its newest state (with the highest revision), which is what
 * compaction keeps. Sends are strictly sequential (one batch in flight), several changes that
 * arrive while a batch is in flight are folded into the next one, and an agent changed twice
 * in that window is published once, at its latest revision. Consumers still compare
 * revisions: with several registry instances two batches may race on the broker.
 */
export class AgentFeed {
  private queued = new Map<string, Array<{ resolve: () => void; reject: (err: unknown) => void }>>();
  private running: Promise<void> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly store: AgentStore,
    private readonly producer: Producer,
    private readonly codec: SchemaCodec,
    private readonly log: Logger,
    private readonly onPublished: (records: number, tombstones: number) => void = () => undefined,
  ) {}

  /** Publishes the agent's current state; resolves once it is durably on the topic (acks=-1). */
  publish(agentId: string): Promise<void> {
    if (this.stopped) return Promise.reject(new ReachError('DEPENDENCY_UNAVAILABLE', 'the registry is shutting down'));
    return new Promise<void>((resolve, reject) => {
      let waiters = this.queued.get(agentId);
      if (!waiters) this.queued.set(agentId, (waiters = []));
      waiters.push({ resolve, reject });
      this.kick();
    });
  }

  /** Fire-and-forget variant for background changes (sweeper): failures are logged and retried. */
  publishInBackground(agentIds: readonly string[]): void {
    for (const id of agentIds) {
      this.publish(id).catch((err: unknown) => this.log.warn({ err, agent_id: id }, 'agent change not yet on the feed; will retry'));
    }
  }

  private kick(): void {
    if (this.running || this.stopped) return;
    this.running = this.drain().finally(() => {
      this.running = undefined;
      if (this.queued.size > 0 && !this.retryTimer) this.kick();
    });
  }

  private async drain(): Promise<void> {
    while (this.queued.size > 0) {
      const batch = this.queued;
      this.queued = new Map();
      const ids = [...batch.keys()];
      try {
        const current = await this.store.getMany(ids);
        const out: OutRecord[] = [];
        for (const [i, id] of ids.entries()) {
          const rec = current[i];
          try {
            out.push({ topic: TOPICS.agents.name, key: id, value: rec ? this.codec.encode<AgentRecord>(AGENTS_SUBJECT, rec) : null });
          } catch (err) {
            // A record that does not fit the schema is a bug here, not a broker problem:
            // retrying would not help, and it must not hold back the other agents.
            this.log.error({ err, agent_id: id }, 'agent record does not fit reach.v1.AgentRecord; not published');
            for (const w of batch.get(id) ?? []) w.reject(err);
            batch.delete(id);
          }
        }
        await produceAll(this.producer, out);
        const tombstones = out.filter((r) => r.value === null).length;
        this.onPublished(out.length - tombstones, tombstones);
        for (const [i, id] of ids.entries()) {
          if (!batch.has(id)) continue;
          const rec = current[i];
          this.log.debug({ agent_id: id, revision: rec?.revision ?? null, status: rec?.status ?? 'DELETED' }, 'agent change published');
        }
        for (const waiters of batch.values()) for (const w of waiters) w.resolve();
      } catch (err) {
        this.log.error({ err, agents: ids.length }, 'publishing agent changes failed');
        for (const waiters of batch.values()) for (const w of waiters) w.reject(err);
        // The change is in Redis but maybe not on the feed: publish these agents' state again
        // shortly (no waiters: the callers already got their error).
        for (const id of batch.keys()) if (!this.queued.has(id)) this.queued.set(id, []);
        this.retryTimer = setTimeout(() => {
          this.retryTimer = undefined;
          this.kick();
        }, RETRY_AFTER_FAILURE_MS);
        this.retryTimer.unref();
        return;
      }
    }
  }

  /** Refuses new changes, then publishes what is queued or in flight (best effort). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    if (this.running) await this.running.catch(() => undefined);
    if (this.queued.size > 0) await this.drain().catch(() => undefined);
  }
}
