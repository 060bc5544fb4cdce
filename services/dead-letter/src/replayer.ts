import { ReachError, type Logger, ATTEMPT_HEADER, TOKEN_HEADER, TRACEPARENT_HEADER } from '@reach/core';
import { TOPICS, produceAll, type OutRecord, type Producer } from '@reach/kafka';
import { entryJson, replayProblem, type EntryRow } from './entry.js';
import type { DeadLetterMetrics } from './metrics.js';
import type { DeadLetterStore } from './store.js';
import type { BulkReplayRequest } from './filters.js';
import { NOOP_TRACER, type Tracer } from '@reach/tracing';

/** Why a replay happened: an admin asked, or an agent for a parked message appeared (R-B10). */
export type ReplayCause = 'manual' | 'bulk' | 'redrive';

/** A replay that could not be done; the admin API answers with `status` (404, 409). */
export class ReplayRefused extends Error {
  constructor(
    readonly status: 404 | 409,
    message: string,
  ) {
    super(message);
    this.name = 'ReplayRefused';
  }
}

export interface ReplayResult {
  dlq_id: string;
  message_id: string | null;
  status: 'REPLAYED';
  attempt: number;
  replay_count: number;
  dry_run: false;
}

/** What a replay would do (`dry_run`): the entry as listed, and the attempt it would start. Nothing is sent. */
export type ReplayPreview = Record<string, unknown> & { dlq_id: string; attempt: number; dry_run: true };

/**
 * The record that sends a stored envelope back through ingress and routing: the original
 * framed bytes (same message_id, trace_id, idempotency_key), the admin token (ingress accepts
 * it for any producer), the attempt it starts, so the read model shows a new attempt, and the
 * trace context the replay continues (ingress's span becomes its child).
 */
export function replayRecord(
  row: Pick<EntryRow, 'envelope' | 'envelope_json' | 'message_id'>,
  adminToken: string,
  attempt: number,
  traceparent?: string | null,
): OutRecord {
  const env = row.envelope_json ?? {};
  const sessionId = typeof env.session_id === 'string' ? env.session_id : null;
  const messageId = typeof env.message_id === 'string' ? env.message_id : row.message_id;
  return {
    topic: TOPICS.ingress.name,
    key: sessionId ?? messageId,
    value: row.envelope,
    headers: { [TOKEN_HEADER]: adminToken, [ATTEMPT_HEADER]: String(attempt), ...(traceparent ? { [TRACEPARENT_HEADER]: traceparent } : {}) },
  };
}

/**
 * The attempt a replay starts: the one after every attempt made so far. The entry's `attempts`
 * counts the attempts made (attempts 0 … attempts − 1; one attempt 0 is `attempts: 1`), the
 * read model holds the latest attempt number, and the entry's history the attempts its earlier
 * replays started (the read model may not show them yet). Always ≥ 1: ingress takes an
 * attempt of 0 for a first send, not a replay. (Before, a replay after a single attempt 0 was
 * reported and run as attempt 2: issue #25.)
 */
export function nextAttempt(entryAttempts: number, readModelAttempt: number | null, history: unknown = []): number {
  const replayed = Array.isArray(history)
    ? history.map((h) =>
        h !== null && typeof h === 'object' && (h as { event?: unknown }).event === 'REPLAYED' ? Number((h as { attempt?: unknown }).attempt) : NaN,
      )
    : [];
  const started = [readModelAttempt ?? 0, ...replayed.filter((n) => Number.isInteger(n) && n >= 0)];
  return Math.max(1, entryAttempts, ...started.map((n) => n + 1));
}

/** The states an admin may replay an entry from (a redrive: PARKED only). */
const REPLAYABLE_FROM: readonly string[] = ['PARKED', 'DEAD', 'REPLAYED'];

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

/** Replays stored entries to reach.ingress.v1 (one, by filter, or as a redrive). */
export class Replayer {
  constructor(
    private readonly store: DeadLetterStore,
    private readonly producer: Producer,
    private readonly adminToken: string | undefined,
    private readonly metrics: DeadLetterMetrics,
    private readonly log: Logger,
    private readonly tracer: Tracer = NOOP_TRACER,
  ) {}

  /**
   * Replays one entry. `from` are the states it may be replayed from: an admin may replay a
   * PARKED, DEAD or already REPLAYED entry; a redrive only a PARKED one (so two instances
   * never redrive the same entry twice).
   */
  async replay(id: string, cause: ReplayCause, from: readonly string[] = REPLAYABLE_FROM): Promise<ReplayResult> {
    if (!this.adminToken) {
      throw new ReachError('DEPENDENCY_UNAVAILABLE', 'REACH_ADMIN_TOKEN is not set for the dead-letter service: replays cannot authenticate to ingress');
    }
    const { row: before, attempt } = await this.planned(id, from);
    const claimed = await this.store.claimForReplay(id, from, { event: 'REPLAYED', at: new Date().toISOString(), attempt, cause });
    if (!claimed) throw new ReplayRefused(409, `dead letter ${id} is ${before.status} and cannot be replayed now (another replay may have taken it)`);
    // The replay continues the trace the entry was stored under (migration 008).
    const span = this.tracer.startSpan('dead_letter_replay', {
      parent: claimed.traceparent ?? undefined,
      traceId: claimed.trace_id ?? undefined,
      kind: 'producer',
      attributes: { 'reach.dlq_id': id, 'reach.message_id': claimed.message_id, 'reach.attempt': attempt, 'reach.replay.cause': cause },
    });
    try {
      await produceAll(this.producer, [replayRecord(claimed, this.adminToken, attempt, span.traceparent ?? claimed.traceparent)]);
    } catch (err) {
      const error = new ReachError('DEPENDENCY_UNAVAILABLE', `Kafka refused the replay: ${(err as Error).message}`, { cause: err });
      span.fail(error);
      await this.store.unclaim(before).catch((e: unknown) => this.log.error({ err: e, dlq_id: id }, 'could not give back a claimed entry'));
      throw error;
    } finally {
      span.end();
    }
    this.metrics.replayed(cause, claimed.reason);
    this.log.info({ dlq_id: id, message_id: claimed.message_id, trace_id: claimed.trace_id, attempt, cause, reason: claimed.reason }, 'dead letter replayed');
    return { dlq_id: id, message_id: claimed.message_id, status: 'REPLAYED', attempt, replay_count: claimed.replay_count, dry_run: false };
  }

  /**
   * A dry run of `replay`: refused alike (404, 409), else the entry and the attempt a replay
   * would start now. Nothing is claimed or sent (issue #25: the id form ignored --dry-run).
   */
  async preview(id: string, from: readonly string[] = REPLAYABLE_FROM): Promise<ReplayPreview> {
    const { row, attempt } = await this.planned(id, from);
    return { ...entryJson(row, false), dlq_id: row.dlq_id, attempt, dry_run: true };
  }

  /** The entry and the attempt its replay starts, or why it cannot be replayed from `from`. */
  private async planned(id: string, from: readonly string[]): Promise<{ row: EntryRow; attempt: number }> {
    const row = await this.store.get(id);
    if (!row) throw new ReplayRefused(404, `dead letter ${id} not found`);
    const problem = replayProblem(row);
    if (problem) throw new ReplayRefused(409, `dead letter ${id} cannot be replayed: ${problem}`);
    if (!from.includes(row.status)) throw new ReplayRefused(409, `dead letter ${id} is ${row.status} and cannot be replayed now`);
    const readModel = row.message_id ? await this.store.lastAttempt(row.message_id) : null;
    return { row, attempt: nextAttempt(row.attempts, readModel, row.history) };
  }

  /**
   * `POST /v1/dlq/replay`: every matching PARKED or DEAD entry (oldest first, at most `limit`),
   * paced at `rate_per_s`. Entries that cannot be replayed (raw bytes only, or taken by a
   * concurrent replay) are counted as skipped; dry_run only counts.
   */
  async replayMatching(req: BulkReplayRequest): Promise<{ matched: number; replayed: number; skipped: number; dry_run: boolean; replayed_ids: string[] }> {
    const candidates = await this.store.replayCandidates(req.filter, req.limit);
    const replayable = candidates.filter((c) => c.envelope_json !== null);
    if (req.dryRun) {
      return { matched: candidates.length, replayed: 0, skipped: candidates.length - replayable.length, dry_run: true, replayed_ids: [] };
    }
    const gapMs = 1000 / req.ratePerS;
    const started = Date.now();
    const ids: string[] = [];
    for (const [i, c] of replayable.entries()) {
      // Paced from the start, not per send: a slow send does not slow the whole run further.
      const due = started + i * gapMs;
      if (due > Date.now()) await sleep(due - Date.now());
      try {
        await this.replay(c.dlq_id, 'bulk', ['PARKED', 'DEAD']);
        ids.push(c.dlq_id);
      } catch (err) {
        if (!(err instanceof ReplayRefused)) throw err;
      }
    }
    return { matched: candidates.length, replayed: ids.length, skipped: candidates.length - ids.length, dry_run: false, replayed_ids: ids };
  }
}
