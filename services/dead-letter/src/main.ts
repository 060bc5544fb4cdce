import { runService } from '@reach/service-kit';

// dead-letter: the DLQ store, sweeps, redrive and the replay/purge admin API (DESIGN §1).
// Foundation stage: the service starts, connects to Kafka and the schema registry, serves
// /healthz, /readyz and /metrics, and stops cleanly. Its pipeline stage lands with issue #3/#4.
await runService({
  name: 'dead-letter',
  port: 'deadLetterPort',
  options: [],
  postgres: true,
  start: async () => undefined,
});
