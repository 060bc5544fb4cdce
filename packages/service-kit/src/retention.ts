import type { Logger } from '@reach/core';
import { PeriodicJob } from './periodic.js';
import type { ServiceMetrics } from './metrics.js';

/** What one round of a retention job removed from one table. */
export interface RetentionOutcome {
  table: string;
  rows?: number;
  partitions?: string[];
}

/**
 * Runs a service's retention job (issue 26: the service that owns a table bounds it) every
 * `everyMs`, never overlapping itself, first right after start. Counts what it removed in
 * reach_<service>_retention_purged_rows_total / retention_dropped_partitions_total by table,
 * and logs a line for every round that removed something.
 */
export function scheduleRetention(
  deps: { metrics: ServiceMetrics; log: Logger; onShutdown(fn: () => Promise<void> | void): void },
  everyMs: number,
  run: () => Promise<RetentionOutcome[]>,
): PeriodicJob {
  const rows = deps.metrics.counter('retention_purged_rows_total', 'Rows deleted because they were older than their retention (batched deletes).', ['table']);
  const partitions = deps.metrics.counter(
    'retention_dropped_partitions_total',
    'Partitions dropped because every row in them was older than their retention.',
    ['table'],
  );
  const round = async (): Promise<void> => {
    for (const o of await run()) {
      if (o.rows) rows.inc({ table: o.table }, o.rows);
      if (o.partitions?.length) partitions.inc({ table: o.table }, o.partitions.length);
      if (o.rows || o.partitions?.length) deps.log.info({ table: o.table, rows: o.rows, partitions: o.partitions }, 'retention: old data removed');
    }
  };
  const job = new PeriodicJob('retention', everyMs, round, deps.log);
  // the first round at once, so a restarted service does not wait a whole period
  void round()
    .catch((err: unknown) => deps.log.warn({ err }, 'retention failed; trying again next interval'))
    .finally(() => job.start());
  deps.onShutdown(() => job.stop());
  return job;
}
