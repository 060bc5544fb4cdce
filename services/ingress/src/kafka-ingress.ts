import { toReachError, type OptionKey, ATTEMPT_HEADER, TOKEN_HEADER } from '@reach/core';
import type { Envelope } from '@reach/envelope';
import { produceAll, TOPICS, valueSubject, type InRecord, type OutRecord } from '@reach/kafka';
import { PeriodicJob, type ServiceContext } from '@reach/service-kit';
import { attemptFromHeader, type Acceptor } from './acceptance.js';
import type { IngressMetrics } from './metrics.js';
import { RefusalFlood } from './refusal-flood.js';

/** How often the dead letters of folded refusal floods are written (each second's, once it is over). */
const FLOOD_FLUSH_MS = 1000;

const INGRESS_SUBJECT = valueSubject(TOPICS.ingress.name);

/**
 * The Kafka ingress path (docs/design.md §2): decode the framed envelope, then the same Acceptor as
 * the HTTP path (token in the `reach-token` header, envelope rules, producer quota, idempotency
 * key). Whatever it returns is produced by the stage before the source offset is committed: the
 * envelope on reach.pending.v1 with its PENDING status, or a refusal (DLQ reason INVALID, or
 * RATE_LIMITED over quota, with its code; REJECTED status; receipt) — past the first few per
 * producer, code and second only counted, and one dead letter per such second carries the
 * count (refusal-flood.ts). A duplicate produces nothing. Only a dependency failure (registry,
 * Redis and PostgreSQL both down) stops the partition, and the stage retries it.
 */
export async function startKafkaIngress<K extends OptionKey>(
  ctx: ServiceContext<K>,
  acceptor: Acceptor,
  metrics: IngressMetrics,
  floodSample: number,
): Promise<void> {
  const { codec } = ctx;
  // Floods of refusals are folded (refusal-flood.ts): the records of a folded refusal are
  // committed with nothing written but a count; its second's one dead letter follows here.
  // A crash before that write loses the count of at most the last second or so.
  const flood = new RefusalFlood(floodSample);
  const flush = async (all: boolean): Promise<void> => {
    const now = Date.now();
    const windows = flood.closed(now, all);
    if (windows.length > 0)
      await produceAll(
        ctx.producer,
        windows.map((w) => acceptor.foldedDeadLetter(w, now)),
      );
    flood.forget(now, [], all);
  };
  const flusher = new PeriodicJob('refusal flood flush', FLOOD_FLUSH_MS, () => flush(false), ctx.log);
  flusher.start();
  ctx.onShutdown(async () => {
    await flusher.stop();
    await flush(true);
  });
  const folded = (token: string | undefined, envelope: Envelope | undefined, code: number): boolean => {
    if (flood.admit(acceptor.refusedProducer(token, envelope), code, Date.now()) === 'full') return false;
    metrics.foldedRefusal(code);
    return true;
  };

  await ctx.stage({
    topics: [TOPICS.ingress.name],
    concurrency: 16,
    handle: async (record: InRecord): Promise<readonly OutRecord[]> => {
      let envelope: Envelope;
      try {
        envelope = await codec.decode<Envelope>(INGRESS_SUBJECT, record.value);
      } catch (err) {
        const error = toReachError(err);
        if (error.retryable && error.codeName !== 'INTERNAL') throw error;
        ctx.log.warn({ code: error.code, err: error.message, partition: record.partition, offset: record.offset }, 'undecodable record sent to the DLQ');
        metrics.undecodable(error.code);
        ctx.metrics.poisonRecords.inc({ topic: record.topic, parked: 'dlq' });
        if (folded(record.headers[TOKEN_HEADER], undefined, error.code)) return [];
        return acceptor.undecodable(record, error);
      }
      try {
        const acceptance = await acceptor.accept({
          envelope,
          token: record.headers[TOKEN_HEADER],
          via: { kind: 'kafka', record },
          traceparent: record.headers.traceparent,
          attempt: attemptFromHeader(record.headers[ATTEMPT_HEADER]),
        });
        metrics.count('kafka', acceptance);
        if (acceptance.outcome === 'rejected' && folded(record.headers[TOKEN_HEADER], envelope, acceptance.error.code)) return [];
        // From the broker's append of the agent's record to its acceptance; the pending record
        // goes out with the rest of the batch right after.
        if (acceptance.outcome === 'accepted') metrics.ingested('kafka', Math.max(0, Date.now() - Number(record.timestamp)) / 1000);
        return acceptance.outcome === 'duplicate' ? [] : acceptance.records;
      } catch (err) {
        const error = toReachError(err);
        if (error.retryable && error.codeName !== 'INTERNAL') throw error;
        // A bug, not the record's fault: still never block the partition, and keep the entry
        // here rather than in the generic poison path, which would keep the producer's token.
        ctx.log.error({ err, message_id: envelope.message_id, trace_id: envelope.trace_id }, 'acceptance failed unexpectedly; record sent to the DLQ');
        ctx.metrics.poisonRecords.inc({ topic: record.topic, parked: 'dlq' });
        return acceptor.undecodable(record, error);
      }
    },
  });
}
