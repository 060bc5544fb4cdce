import type { ServiceMetrics } from '@reach/service-kit';
import type { WriteResult } from './writer.js';

type Counter = ReturnType<ServiceMetrics['counter']>;
type Histogram = ReturnType<ServiceMetrics['histogram']>;

const TERMINAL = new Set(['DELIVERED', 'REJECTED', 'DEAD']);

/** reach_tracker_*: what the writer does, and message outcomes (R-F2). */
export class TrackerMetrics {
  private readonly rows: Counter;
  private readonly timelineEvents: Counter;
  private readonly batchSize: Histogram;
  private readonly writeSeconds: Histogram;
  private readonly outcomes: Counter;
  private readonly poison: Counter;
  private readonly endToEnd: Histogram;
  private readonly poisonRecords: ServiceMetrics['poisonRecords'];

  constructor(metrics: ServiceMetrics) {
    this.poisonRecords = metrics.poisonRecords;
    this.rows = metrics.counter(
      'rows_written_total',
      'Rows written to the read model: message rows inserted or updated (status moved forward, timeline grown).',
      ['table'],
    );
    this.timelineEvents = metrics.counter(
      'timeline_events_total',
      "Status events newly recorded in their message's timeline (a redelivered one is not counted again).",
    );
    this.batchSize = metrics.histogram(
      'batch_size_events',
      'Status events per read-model write.',
      [],
      [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000],
    );
    this.writeSeconds = metrics.histogram(
      'write_duration_seconds',
      'Time of one batched read-model write (one statement).',
      [],
      [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    );
    this.outcomes = metrics.counter(
      'outcomes_total',
      'Messages reaching a terminal state (DELIVERED, REJECTED, DEAD), on their first attempt or after retries; counted once per event.',
      ['state', 'first_attempt'],
    );
    this.endToEnd = metrics.histogram(
      'end_to_end_duration_seconds',
      "From a message's created_at to its terminal state (DELIVERED, REJECTED, DEAD), counted once per terminal event.",
      ['state'],
      [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800],
    );
    this.poison = metrics.counter('unusable_events_total', 'Status records that could not be decoded or stored; sent to the DLQ.');
  }

  written(batchEvents: number, seconds: number, result: WriteResult): void {
    this.batchSize.observe(batchEvents);
    this.writeSeconds.observe(seconds);
    this.rows.inc({ table: 'messages' }, result.messages);
    this.timelineEvents.inc(result.events);
    for (const e of result.newEvents) {
      if (!TERMINAL.has(e.state)) continue;
      this.outcomes.inc({ state: e.state, first_attempt: String(e.first_attempt) }, e.n);
      for (const age of e.ages_s) this.endToEnd.observe({ state: e.state }, Math.max(0, age));
    }
  }

  /** A status record (or one event of a batch) sent to the DLQ: it can never be stored. */
  unusable(topic: string): void {
    this.poison.inc();
    this.poisonRecords.inc({ topic, parked: 'dlq' });
  }

  /** An event PostgreSQL refused for its text, stored with that text made storable. */
  sanitized(topic: string): void {
    this.poisonRecords.inc({ topic, parked: 'stored_sanitized' });
  }
}
