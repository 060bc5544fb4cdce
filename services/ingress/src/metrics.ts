import type { ServiceMetrics } from '@reach/service-kit';
import type { Acceptance } from './acceptance.js';
import type { BucketEvents } from './quota-buckets.js';

type Counter = ReturnType<ServiceMetrics['counter']>;
type Gauge = ReturnType<ServiceMetrics['gauge']>;
type Histogram = ReturnType<ServiceMetrics['histogram']>;

/** Ingress's own metrics, next to the service kit's consume-loop ones. Labels stay bounded: never an agent id. */
export class IngressMetrics {
  private readonly messages: Counter;
  private readonly rejections: Counter;
  private readonly quotaRejections: Counter;
  private readonly quotaLocal: Counter;
  private readonly quotaDegraded: Gauge;
  private readonly ingestSeconds: Histogram;
  private readonly httpRefusals: Counter;
  private readonly foldedRefusals: Counter;

  constructor(metrics: ServiceMetrics) {
    this.messages = metrics.counter('messages_total', 'Submitted messages by path (kafka, http) and outcome (accepted, duplicate, rejected).', [
      'path',
      'outcome',
    ]);
    this.rejections = metrics.counter('rejected_messages_total', 'Rejected submissions by path and error code.', ['path', 'code']);
    this.quotaRejections = metrics.counter('quota_rejections_total', 'Submissions refused because the producer was over its quota (4129), by path.', ['path']);
    this.quotaLocal = metrics.counter(
      'quota_local_decisions_total',
      'Quota decisions taken by this instance alone because Redis was unavailable (each instance then admits up to the full quota).',
    );
    this.quotaDegraded = metrics.gauge('quota_degraded', '1 while quota buckets are decided locally because Redis is unavailable, else 0.');
    this.quotaDegraded.set(0);
    this.httpRefusals = metrics.counter(
      'http_refusals_total',
      'POST /v1/messages answered with a refusal (400, 401, 413, 429), by HTTP status and error code. HTTP refusals write no dead letter and no status row: this counter is their only trace.',
      ['status', 'code'],
    );
    this.foldedRefusals = metrics.counter(
      'folded_refusals_total',
      'Kafka-ingress refusals past the first REACH_DLQ_FLOOD_SAMPLE of their producer, code and second: counted into one dead letter per such second instead of one each, by error code.',
      ['code'],
    );
    this.ingestSeconds = metrics.histogram(
      'ingest_duration_seconds',
      'Ingest stage of accepted messages: HTTP from the request to its pending record being written; Kafka from the record being appended to its acceptance.',
      ['path'],
      [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    );
  }

  ingested(path: 'kafka' | 'http', seconds: number): void {
    this.ingestSeconds.observe({ path }, seconds);
  }

  count(path: 'kafka' | 'http', a: Acceptance): void {
    this.messages.inc({ path, outcome: a.outcome });
    if (a.outcome !== 'rejected') return;
    this.rejections.inc({ path, code: String(a.error.code) });
    if (a.error.codeName === 'RATE_LIMITED') this.quotaRejections.inc({ path });
  }

  httpRefused(status: number, code: number): void {
    this.httpRefusals.inc({ status: String(status), code: String(code) });
  }

  foldedRefusal(code: number): void {
    this.foldedRefusals.inc({ code: String(code) });
  }

  undecodable(code: number): void {
    this.messages.inc({ path: 'kafka', outcome: 'rejected' });
    this.rejections.inc({ path: 'kafka', code: String(code) });
  }

  /** Hooks for the quota buckets' degradation (Redis unavailable). */
  readonly bucketEvents: BucketEvents = {
    degraded: (on) => this.quotaDegraded.set(on ? 1 : 0),
    localDecision: () => this.quotaLocal.inc(),
  };
}
