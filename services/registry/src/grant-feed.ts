import { ReachError, type Logger } from '@reach/core';
import type { Grant, SchemaCodec } from '@reach/envelope';
import { TOPICS, produceAll, startTableView, valueSubject, type Kafka, type OutRecord, type Producer } from '@reach/kafka';
import type { GrantStore } from './grant-store.js';
import type { StoredGrant } from './grants.js';

const GRANTS_SUBJECT = valueSubject(TOPICS.grants.name);
const RETRY_AFTER_FAILURE_MS = 2000;
/** Reading reach.grants.v1 back at start (a consumer group join and one partition). */
const READ_TOPIC_TIMEOUT_MS = 60_000;

/**
 * The grants change feed: reach.grants.v1 (compacted, key grant_id, value reach.v1.Grant,
 * tombstone = revoked), which routers follow. PostgreSQL is the source of truth: a change is
 * written there first, then the grant's current state is published. Publishing reads that
 * state under the grant lock (grant-store.ts), so concurrent changes on several registry
 * instances, or a start-up reconcile racing a revocation, still leave the topic equal to
 * PostgreSQL. A failed publication is retried in the background until it gets through.
 */
export class GrantFeed {
  private readonly retry = new Set<string>();
  private retryTimer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly store: GrantStore,
    private readonly kafka: Kafka,
    private readonly producer: Producer,
    private readonly codec: SchemaCodec,
    private readonly log: Logger,
  ) {}

  /** Publishes the current state (record, or tombstone when gone) of these grants; resolves once on the topic. */
  async publish(ids: readonly string[], timeoutMs: number): Promise<void> {
    try {
      await withTimeout(
        this.store.withLock(async (read) => {
          const current = await read.byIds(ids);
          await produceAll(
            this.producer,
            ids.map((id) => this.record(id, current.get(id))),
          );
        }),
        timeoutMs,
      );
    } catch (err) {
      // In PostgreSQL but maybe not on the topic: publish again shortly (the caller gets 503).
      for (const id of ids) this.retry.add(id);
      this.scheduleRetry();
      if (err instanceof ReachError) throw err;
      throw new ReachError('DEPENDENCY_UNAVAILABLE', `the grant change is stored but not yet on ${TOPICS.grants.name}: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  /**
   * Makes the topic equal PostgreSQL (at start): every stored grant is published again and
   * every grant id alive on the topic but not stored gets a tombstone.
   */
  async reconcile(): Promise<{ published: number; tombstoned: number }> {
    const onTopic = await this.topicKeys();
    return this.store.withLock(async (read) => {
      const grants = await read.all();
      const stored = new Set(grants.map((g) => g.grant_id));
      const stale = [...onTopic].filter((id) => !stored.has(id));
      await produceAll(this.producer, [...grants.map((g) => this.record(g.grant_id, g)), ...stale.map((id) => this.record(id, undefined))]);
      return { published: grants.length, tombstoned: stale.length };
    });
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  stop(): void {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
  }

  private record(id: string, grant: StoredGrant | undefined): OutRecord {
    const value: Grant | undefined = grant && {
      grant_id: grant.grant_id,
      from_domain: grant.from_domain,
      to_domain: grant.to_domain,
      capability: grant.capability,
      created_by: grant.created_by,
      created_at: grant.created_at,
    };
    return { topic: TOPICS.grants.name, key: id, value: value ? this.codec.encode<Grant>(GRANTS_SUBJECT, value) : null };
  }

  /** The grant ids alive on the topic now (a private, never-committing read from the beginning). */
  private async topicKeys(): Promise<Set<string>> {
    const view = await startTableView<true>({
      kafka: this.kafka,
      topic: TOPICS.grants.name,
      logger: this.log,
      groupPrefix: 'reach-registry-grants-reconcile',
      decode: () => Promise.resolve(true),
      // A short read: a consumer that dies leaves ready() unresolved, and the timeout below
      // fails this reconcile, which is retried.
      onFatal: (err) => this.log.warn({ err }, 'grants read-back consumer crashed'),
    });
    try {
      await withTimeout(view.ready(), READ_TOPIC_TIMEOUT_MS);
      return new Set([...view.entries()].map(([id]) => id));
    } finally {
      await view.stop();
    }
  }

  private scheduleRetry(): void {
    if (this.retryTimer || this.stopped) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      const ids = [...this.retry];
      this.retry.clear();
      if (ids.length === 0) return;
      this.publish(ids, 30_000).then(
        () => this.log.info({ grants: ids }, 'grant changes published after a retry'),
        (err: unknown) => this.log.warn({ err, grants: ids }, 'grant changes still not published; will retry'),
      );
    }, RETRY_AFTER_FAILURE_MS);
    this.retryTimer.unref();
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ReachError('DEPENDENCY_UNAVAILABLE', `did not complete within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
