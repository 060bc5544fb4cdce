import { ERROR, TRACEPARENT_HEADER } from '@reach/core';
import type { RetryRequest } from '@reach/envelope';
import { runDelayStage, TOPICS, valueSubject } from '@reach/kafka';
import { deadLetterRecord, forMessage, runService, type ServiceContext } from '@reach/service-kit';
import { budgetPolicyOf, isHold } from '@reach/routing';
import { NOOP_SPAN } from '@reach/tracing';
import { republish } from './republish.js';
import { StuckSweeper } from './stuck-sweeper.js';
import { EndMarks } from './end-marks.js';
import { KafkaOffsetReader, ReadModelWatermark } from './read-model-watermark.js';

const OPTIONS = ['budgetMs', 'budgetPolicy', 'stuckSweepMs', 'stuckGraceMs'] as const;

const RETRY_SUBJECT = valueSubject(TOPICS.retry.name);
/** The tracker's consumer group and topics: how far the read model the sweep judges by is complete. */
const TRACKER_GROUP = 'reach-tracker';
const TRACKER_TOPICS = [TOPICS.statusBatches.name, TOPICS.status.name];
/** Snapshots of the status topics kept: a tracker further behind holds the sweep until it catches up. */
const WATERMARK_KEEP_MS = 30 * 60_000;

// retry-scheduler: reach.retry.v1 → reach.pending.v1 when each request's not_before is due
// (docs/design.md §12). The delay lives on Kafka (records queued in memory only as a copy, offsets
// committed once handled), so it survives restarts. Backoff and attempt counts are decided by whoever saw the attempt fail (the
// dispatcher); here a request due after its message's budget ends the message instead (3005/
// 3006), and a sweep ends messages stuck non-terminal past their budget (R-D2).
async function start(ctx: ServiceContext<(typeof OPTIONS)[number]>): Promise<void> {
  const { codec, metrics, config } = ctx;
  const budget = budgetPolicyOf(config);
  // Not a spread of ctx: its getters of services it does not use (redis) throw.
  const republishCtx = { codec, service: ctx.service, instanceId: ctx.instanceId, budget };
  const expired = metrics.counter('dead_total', 'Messages declared DEAD here, by code (3005 budget, 3006 expired) and source (due, sweep).', [
    'code',
    'source',
  ]);
  const republished = metrics.counter('republished_total', 'Retry requests re-published to reach.pending.v1, by kind (hold, retry).', ['kind']);
  const lateness = metrics.histogram(
    'republish_lateness_seconds',
    'How long after its not_before a retry request was re-published.',
    [],
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  );
  const pauses = metrics.counter('partition_pauses_total', 'Times a partition was paused until its next request was due.');
  const skipped = metrics.counter(
    'skipped_total',
    'Retry requests come due for a message already ended (canceled by its sender, or declared DEAD by the stuck sweep): dropped, not re-published; by kind (hold, retry).',
    ['kind'],
  );
  const endMarks = new EndMarks(ctx.redis);

  const stage = await runDelayStage<RetryRequest>({
    kafka: ctx.kafka,
    producer: ctx.producer,
    groupId: `reach-${ctx.service}`,
    topic: TOPICS.retry.name,
    logger: ctx.log,
    partitionsConsumedConcurrently: 6,
    decode: (record) => codec.decode<RetryRequest>(RETRY_SUBJECT, record.value),
    dueAt: (req) => req.not_before,
    handle: async (req, record) => {
      const kind = isHold(req) ? 'hold' : 'retry';
      if (await endMarks.isEnded(req.message_id)) {
        skipped.inc({ kind });
        forMessage(ctx.log, req.envelope).info(
          { attempt: req.attempt, kind },
          'retry request of a message already ended (canceled, or DEAD): not re-published',
        );
        return [];
      }
      const now = Date.now();
      // The wait on reach.retry.v1, from the request's append to its re-publication (R-F1).
      const span = ctx.tracer.enabled
        ? ctx.tracer.startSpan('retry_wait', {
            parent: record.headers[TRACEPARENT_HEADER],
            traceId: req.envelope.trace_id,
            startTime: Number(record.timestamp),
            attributes: { 'reach.message_id': req.message_id, 'reach.attempt': req.attempt, 'reach.retry.kind': kind, 'reach.retry.code': req.code },
          })
        : NOOP_SPAN;
      const out = republish(republishCtx, req, record, now, span.traceparent ?? record.headers[TRACEPARENT_HEADER]);
      if (out[0]?.topic !== TOPICS.pending.name) {
        const code = req.envelope.expire_at !== null && now >= req.envelope.expire_at ? ERROR.EXPIRED : ERROR.BUDGET_EXCEEDED;
        expired.inc({ code: String(code), source: 'due' });
        span.fail({ code, codeName: code === ERROR.EXPIRED ? 'EXPIRED' : 'BUDGET_EXCEEDED', message: 'due after the time budget' });
        span.end(now);
        return out;
      }
      span.end(now);
      republished.inc({ kind });
      lateness.observe(Math.max(0, now - req.not_before) / 1000);
      forMessage(ctx.log, req.envelope).debug({ attempt: req.attempt, reason: req.reason, kind }, 're-published to reach.pending.v1');
      return out;
    },
    onPoison: (record, error) => [deadLetterRecord(codec, { service: ctx.service, error, record })],
    onFatal: (err) => {
      ctx.log.fatal({ err }, 'retry consumer cannot continue; exiting for a supervised restart');
      process.exitCode = 70;
      process.kill(process.pid, 'SIGTERM');
    },
    onRecord: (outcome, record, ms) => {
      metrics.stageRecords.inc({ topic: record.topic, outcome });
      if (outcome === 'poison') metrics.poisonRecords.inc({ topic: record.topic, parked: 'dlq' });
      metrics.stageSeconds.observe({ topic: record.topic }, ms / 1000);
    },
    onPause: () => pauses.inc(),
  });
  ctx.onShutdown(() => stage.stop());

  const heldBack = metrics.counter(
    'sweep_held_back_total',
    'Messages past their budget the stuck sweep left for a later round because the read model (the tracker) lagged behind them.',
  );
  const offsets = new KafkaOffsetReader(ctx.kafka, TRACKER_GROUP, TRACKER_TOPICS);
  ctx.onShutdown(() => offsets.close());
  const watermark = new ReadModelWatermark(offsets, WATERMARK_KEEP_MS);
  const sweeper = new StuckSweeper({
    pg: ctx.pg,
    codec,
    producer: ctx.producer,
    service: ctx.service,
    instanceId: ctx.instanceId,
    budget,
    intervalMs: config.stuckSweepMs,
    graceMs: config.stuckGraceMs,
    log: ctx.log,
    onDeclared: (code) => expired.inc({ code: String(code), source: 'sweep' }),
    readModelCompleteUntil: (now) => watermark.observe(now),
    onHeldBack: (n) => heldBack.inc(n),
    markEnded: (ids, now) => endMarks.mark(ids, now),
  });
  sweeper.start();
  ctx.onShutdown(() => sweeper.stop());
}

await runService({
  name: 'retry-scheduler',
  port: 'retrySchedulerPort',
  options: OPTIONS,
  postgres: true,
  redis: true,
  start,
});
