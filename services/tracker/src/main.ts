import { IDLE_FETCH_WAIT_MS, TOPICS } from '@reach/kafka';
import { PeriodicJob, runService, scheduleRetention, type ServiceContext } from '@reach/service-kit';
import { ensurePartitions, retentionCheckMs } from '@reach/store';
import { TrackerMetrics } from './metrics.js';
import { StatusFolder } from './status-folder.js';
import { readModelUpkeep } from './retention.js';
import { VACUUM_CHECK_MS, vacuumReadModel } from './vacuum.js';
import { ReadModelWriter } from './writer.js';

// tracker: the message read model: reach.status-batches.v1 (what the stages produce) and
// reach.status.v1 (single events from outside producers and tools) → PostgreSQL `messages` and
// their timelines, in batches (docs/design.md §1, R-D1, R-E4). The only writer of those tables.
const OPTIONS = ['trackerBatchSize', 'retentionMessages', 'partitionInterval'] as const;
type Key = (typeof OPTIONS)[number];

// Partitions are consumed concurrently and their batches written together (GroupCommit in packages/kafka):
// one message's events sit on several partitions (each stage packs its own), and folded in one
// write they update its row once. Two tracker instances may still write one row at once: each
// write locks its rows in message-id order (no deadlock), and the forward-only upsert makes the
// outcome independent of the order.
const PARALLEL_PARTITIONS = 3;
/**
 * After a fetch that reached the head of its partitions the tracker waits 100 ms before the next,
 * which then brings what arrived meanwhile (with a backlog it fetches again at once). A message's four events arrive within milliseconds of each
 * other, so most of them fold into one upsert of its row instead of four (each a non-HOT update
 * touching every index of `messages`), and each partition commits a transaction every 100 ms
 * instead of after every small fetch. The read model lags by at most that much more. The wait is
 * on this side (lingerMs), not the broker's (minBytes with a 100 ms maxWait): that answered an
 * idle tracker every 100 ms, ten empty fetches a second; idle, it now asks once a second.
 */
const FETCH_WAIT = { maxWaitMs: IDLE_FETCH_WAIT_MS, lingerMs: 100 };

async function start(ctx: ServiceContext<Key>): Promise<void> {
  const metrics = new TrackerMetrics(ctx.metrics);
  const folder = new StatusFolder(ctx.codec, new ReadModelWriter(ctx.pg), metrics, ctx.log, ctx.service);

  // Partitions are made ahead (PARTITIONS_AHEAD intervals) and old ones dropped, at start and
  // then every quarter of the shorter of the interval and the retention (at most hourly).
  const { partitionInterval: intervalS, retentionMessages: retentionS } = ctx.config;
  await ensurePartitions(ctx.pg, { intervalS }); // before the first write, so nothing lands in DEFAULT
  scheduleRetention(ctx, retentionCheckMs(Math.min(intervalS, retentionS)), () => readModelUpkeep(ctx.pg, { intervalS, retentionS }));
  // Dead row versions reclaimed when the server's autovacuum is off (vacuum.ts).
  const vacuum = new PeriodicJob(
    'vacuum',
    VACUUM_CHECK_MS,
    async () => {
      const vacuumed = await vacuumReadModel(ctx.pg);
      if (vacuumed.length > 0) ctx.log.info({ partitions: vacuumed }, 'autovacuum is off: read-model partitions vacuumed');
    },
    ctx.log,
  );
  vacuum.start();
  ctx.onShutdown(() => vacuum.stop());

  await ctx.batchStage({
    topics: [TOPICS.statusBatches.name, TOPICS.status.name],
    maxBatch: ctx.config.trackerBatchSize,
    partitionsConsumedConcurrently: PARALLEL_PARTITIONS,
    fetchWait: FETCH_WAIT,
    handleBatch: (records) => folder.handle(records),
  });
}

await runService({
  name: 'tracker',
  port: 'trackerPort',
  options: OPTIONS,
  postgres: true,
  start,
});
