import { runService } from '@reach/service-kit';

// retry-scheduler: backoff delays, attempt and budget accounting; reach.retry.v1 → reach.pending.v1 (DESIGN §1).
// Foundation stage: the service starts, connects to Kafka and the schema registry, serves
// /healthz, /readyz and /metrics, and stops cleanly. Its pipeline stage lands with issue #3/#4.
await runService({
  name: 'retry-scheduler',
  port: 'retrySchedulerPort',
  options: [],
  start: async () => undefined,
});
