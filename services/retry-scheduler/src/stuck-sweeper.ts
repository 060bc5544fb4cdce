import { BUDGET_FROM_HEADER, ReachError, type Logger, ERROR } from '@reach/core';
import type { Envelope, Priority, SchemaCodec } from '@reach/envelope';
import { TOPICS, produceAll, type OutRecord, type Producer } from '@reach/kafka';
import { budgetDeadlineAt, FANOUT_PARENT, type BudgetPolicy } from '@reach/routing';
import { deadLetterRecord, receiptRecord, statusRecord, PeriodicJob } from '@reach/service-kit';
import type { MessageColumns, Pool } from '@reach/store';
import type { EndVerdicts } from './end-marks.js';

/**
 * The backstop of R-D2: no message stays non-terminal beyond its budget plus one sweep.
 * Every REACH_STUCK_SWEEP_MS one retry-scheduler instance (a PostgreSQL advisory lock picks it)
 * reads the tracker's `messages` for PENDING / ROUTED / DELIVERING rows whose budget
 * (`min(created_at + budget(type), expire_at)`) ended more than REACH_STUCK_GRACE_MS ago and
 * declares each DEAD — 3006 when past expire_at, else 3005 — with a DLQ entry and a receipt.
 * These are messages the pipeline lost track of: a delivery whose buffer entry was lost with
 * Redis, a record dropped between stages, a dispatcher that died between taking an expired
 * delivery and reporting it. Parked NO_ROUTE messages (PENDING 2001) wait for an agent until
 * their expire_at (R-B10), so for them only expire_at counts.
 *
 * The read model can lag (a tracker restarting, a burst): a row is judged only when every
 * status event produced before its deadline is known to be in PostgreSQL (ReadModelWatermark),
 * so a message whose DELIVERED is still on its way is never declared DEAD. A message thus ends
 * at most its budget + grace + two sweeps (plus however long the tracker lags) after creation.
 *
 * The read model has no payloads (they stay in Kafka): the DLQ entry keeps the envelope's
 * fields with an empty payload. Messages declared here are remembered for a while, so a tracker
 * that lags behind one sweep does not get them declared twice.
 */
const LOCK_KEY = 0x72656163; // 'reac'
const BATCH = 500;
/** Pages read in one sweep at most (so one sweep declares up to 10,000 messages). */
const MAX_PAGES = 20;
const REMEMBER_MS = 10 * 60_000;

export interface StuckSweeperDeps {
  pg: Pool;
  codec: SchemaCodec;
  producer: Producer;
  service: string;
  instanceId: string;
  budget: BudgetPolicy;
  intervalMs: number;
  graceMs: number;
  log: Logger;
  onDeclared?: (code: number) => void;
  /**
   * The last check of the messages about to be declared DEAD, which also marks them so that
   * the dispatcher refuses a later answer (EndMarks): acked ones (DELIVERED on its way) and
   * working ones (their agent reports progress) are left alone. Throws when that cannot be
   * known; the round is then skipped. Absent: all are declared.
   */
  markEnded?: (messageIds: readonly string[], now: number) => Promise<EndVerdicts>;
  /**
   * Until when the read model is complete (ReadModelWatermark): a message whose deadline is
   * later is not judged from it yet, since its DELIVERED may still be on its way to the
   * tracker. Throws when that cannot be known; the round is then skipped. Absent: complete.
   */
  readModelCompleteUntil?: (now: number) => Promise<number>;
  /** Counts messages past their deadline left for a later round because the read model lags. */
  onHeldBack?: (count: number) => void;
}

/** Where a page of candidates ended: the next page starts after it. */
interface PageEnd {
  createdAt: Date;
  messageId: string;
}

/**
 * The read-model columns the sweep selects, and where a replayed message's budget starts: the
 * time of the PENDING with which ingress accepted its latest dead-letter replay (its detail
 * holds `budget_from`), null for a message never replayed.
 */
type Row = Omit<MessageColumns, 'result' | 'rule'> & { budget_from: Date | null };

/** The envelope of a read-model row (no payload: the read model does not keep it). */
export function envelopeOfRow(r: Row): Envelope {
  return {
    message_id: r.message_id,
    message_type: r.message_type,
    capability: r.capability,
    topic: r.topic,
    target_agent_id: r.target_agent_id,
    producer: r.producer,
    trace_id: r.trace_id,
    request_id: r.request_id,
    idempotency_key: r.idempotency_key,
    session_id: r.session_id,
    correlation_id: r.correlation_id,
    reply_to: r.reply_to,
    priority: r.priority as Priority,
    tags: [],
    retryable: true,
    timeout_ms: null,
    created_at: r.created_at.getTime(),
    expire_at: r.expire_at ? r.expire_at.getTime() : null,
    schema_version: 1,
    content_type: 'application/json',
    payload: Buffer.alloc(0),
    headers: r.parent_message_id ? { [FANOUT_PARENT]: r.parent_message_id } : {},
  };
}

/** When a row's time is up: its budget end, or for a parked message its expire_at. */
export function stuckDeadline(
  r: Pick<Row, 'status' | 'code' | 'message_type' | 'created_at' | 'expire_at'> & { budget_from?: Date | null },
  budget: BudgetPolicy,
): number {
  const expireAt = r.expire_at ? r.expire_at.getTime() : null;
  if (r.status === 'PENDING' && r.code === ERROR.NO_ROUTE) return expireAt ?? Number.POSITIVE_INFINITY;
  // A replay's budget counts from its replay (docs/pipeline.md, "Replays"), as the router's and dispatcher's do.
  const headers = r.budget_from ? { [BUDGET_FROM_HEADER]: String(r.budget_from.getTime()) } : undefined;
  return budgetDeadlineAt({ message_type: r.message_type, created_at: r.created_at.getTime(), expire_at: expireAt, headers }, budget);
}

/** The sweep's memory of what it declared: per attempt, so a replay (a later attempt) of a declared message is judged afresh. */
const declaredKey = (r: Pick<Row, 'message_id' | 'attempt'>): string => `${r.message_id}#${r.attempt}`;

export class StuckSweeper {
  private readonly job: PeriodicJob;
  private readonly declared = new Map<string, number>();

  constructor(private readonly d: StuckSweeperDeps) {
    this.job = new PeriodicJob('stuck-message sweep', d.intervalMs, () => this.sweep(), d.log);
  }

  start(): void {
    this.job.start();
  }

  stop(): Promise<void> {
    return this.job.stop();
  }

  /**
   * One sweep; returns how many messages it declared DEAD. It reads the candidates a page of
   * BATCH at a time (oldest first) and goes on while pages come back full, up to MAX_PAGES: an
   * outage's backlog past its budget (tens of thousands at 500 msg/s) ends within a sweep or
   * two, not at BATCH per interval (`pnpm chaos --long`: declared DEAD 2.5 min past its budget).
   */
  async sweep(now: number = Date.now()): Promise<number> {
    for (const [id, at] of this.declared) if (now - at > REMEMBER_MS) this.declared.delete(id);
    const complete = (await this.d.readModelCompleteUntil?.(now)) ?? Number.POSITIVE_INFINITY;
    let declared = 0;
    let heldBack = 0;
    let after: PageEnd | undefined;
    for (let page = 0; page < MAX_PAGES; page++) {
      const r = await this.sweepPage(now, complete, after);
      if (r === undefined) break; // another instance sweeps
      declared += r.declared;
      heldBack += r.heldBack;
      // Rows after a held-back one are (but for shorter budgets) later still: next round.
      if (r.last === undefined || r.heldBack > 0) break;
      after = r.last;
    }
    if (declared > 0) this.d.log.info({ count: declared }, 'stuck messages declared DEAD');
    if (heldBack > 0) {
      this.d.onHeldBack?.(heldBack);
      const lagS = Number.isFinite(complete) ? Math.round((now - complete) / 1000) : null;
      this.d.log.info({ count: heldBack, read_model_complete_s_ago: lagS }, 'past their budget, but the read model lags behind them: judged in a later round');
    }
    return declared;
  }

  /**
   * One page of candidates after `after` (in created_at, message_id order), under the advisory
   * lock. Undefined when another instance holds the lock; `last` is set when the page was full.
   */
  private async sweepPage(
    now: number,
    complete: number,
    after: PageEnd | undefined,
  ): Promise<{ declared: number; heldBack: number; last?: PageEnd } | undefined> {
    const minBudget = Math.min(this.d.budget.defaultMs, ...Object.values(this.d.budget.byType));
    const client = await this.d.pg.connect();
    try {
      await client.query('BEGIN');
      const locked = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1) AS ok', [LOCK_KEY]);
      if (!locked.rows[0]?.ok) {
        await client.query('ROLLBACK');
        return undefined;
      }
      // Candidates by index (status); the exact per-type budget is applied below.
      const res = await client.query<Row>(
        `SELECT message_id, created_at, status, attempt, message_type, producer, capability, topic, target_agent_id, agent_id,
                parent_message_id, trace_id, request_id, session_id, correlation_id, reply_to, idempotency_key, priority,
                expire_at, code, reason, updated_at,
                CASE WHEN attempt > 0 THEN
                  (SELECT max(e.at) FROM message_timeline e
                    WHERE e.message_id = m.message_id AND e.created_at = m.created_at AND e.state = 'PENDING' AND e.detail ? 'budget_from')
                END AS budget_from
           FROM messages m
          WHERE status IN ('PENDING', 'ROUTED', 'DELIVERING')
            AND (created_at < $1::timestamptz OR expire_at < $2::timestamptz)
            AND ($4::timestamptz IS NULL OR (created_at, message_id) > ($4::timestamptz, $5::text))
          ORDER BY created_at, message_id
          LIMIT $3`,
        [new Date(now - minBudget - this.d.graceMs), new Date(now - this.d.graceMs), BATCH, after?.createdAt ?? null, after?.messageId ?? null],
      );
      const due: Array<{ row: Row; deadline: number }> = [];
      let heldBack = 0;
      for (const row of res.rows) {
        if (this.declared.has(declaredKey(row))) continue;
        const deadline = stuckDeadline(row, this.d.budget);
        if (deadline + this.d.graceMs > now) continue;
        if (deadline > complete) {
          heldBack++;
          continue;
        }
        due.push({ row, deadline });
      }
      const verdicts = await this.d.markEnded?.(
        due.map((x) => x.row.message_id),
        now,
      );
      const out: OutRecord[] = [];
      const ids: Array<{ key: string; code: number }> = [];
      for (const { row, deadline } of due) {
        if (verdicts?.acked.has(row.message_id)) {
          this.d.log.info(
            { message_id: row.message_id, status: row.status },
            'past its budget but acked by its agent: its DELIVERED is on the way, not declared DEAD',
          );
          continue;
        }
        if (verdicts?.working.has(row.message_id)) {
          this.d.log.debug({ message_id: row.message_id, status: row.status }, 'past its budget but its agent reports progress: not stuck');
          continue;
        }
        out.push(...this.deadRecords(row, deadline, now));
        ids.push({ key: declaredKey(row), code: row.expire_at && row.expire_at.getTime() <= now ? ERROR.EXPIRED : ERROR.BUDGET_EXCEEDED });
      }
      if (out.length > 0) await produceAll(this.d.producer, out);
      await client.query('COMMIT');
      for (const { key, code } of ids) {
        this.declared.set(key, now);
        this.d.onDeclared?.(code);
      }
      const lastRow = res.rows.length === BATCH ? res.rows[res.rows.length - 1] : undefined;
      return { declared: ids.length, heldBack, ...(lastRow ? { last: { createdAt: lastRow.created_at, messageId: lastRow.message_id } } : {}) };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  private deadRecords(row: Row, deadline: number, now: number): OutRecord[] {
    const env = envelopeOfRow(row);
    const expired = env.expire_at !== null && env.expire_at <= now;
    const error = expired
      ? new ReachError('EXPIRED', `expired at ${new Date(env.expire_at!).toISOString()}; it was still ${row.status} (attempt ${row.attempt})`)
      : new ReachError('BUDGET_EXCEEDED', `its time budget ended at ${new Date(deadline).toISOString()}; it was still ${row.status} (attempt ${row.attempt})`);
    const history = [{ attempt: row.attempt, state: row.status, agent_id: row.agent_id, code: row.code, reason: row.reason, at: row.updated_at.toISOString() }];
    this.d.log.info({ trace_id: env.trace_id, message_id: env.message_id, state: row.status, code: error.code }, 'stuck message declared DEAD');
    const out: OutRecord[] = [
      statusRecord(
        this.d.codec,
        {
          state: 'DEAD',
          envelope: env,
          service: this.d.service,
          instance: this.d.instanceId,
          attempt: row.attempt,
          agentId: row.agent_id,
          parentMessageId: row.parent_message_id,
          code: error.code,
          reason: error.message,
          detail: { swept: true, stuck_in: row.status, budget_deadline: new Date(deadline).toISOString() },
        },
        now,
      ),
      deadLetterRecord(
        this.d.codec,
        { service: this.d.service, error, envelope: env, attempts: row.attempt + 1, history, sourceTopic: TOPICS.status.name },
        now,
      ),
    ];
    const receipt = receiptRecord(this.d.codec, env, { state: 'DEAD', code: error.code, reason: error.message }, now);
    if (receipt) out.push(receipt);
    return out;
  }
}
