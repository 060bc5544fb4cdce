import { runService } from '@reach/service-kit';

// tracker: the message read model: reach.status.v1 → PostgreSQL, in batches (DESIGN §1).
// Foundation stage: the service starts, connects to Kafka and the schema registry, serves
// /healthz, /readyz and /metrics, and stops cleanly. Its pipeline stage lands with issue #3/#4.
await runService({
  name: 'tracker',
  port: 'trackerPort',
  options: [],
  postgres: true,
  start: async () => undefined,
});
