import { runService } from '@reach/service-kit';

// registry: agent records, leases, QoS, grants and the public agent API; publishes reach.agents.v1 (DESIGN §1).
// Foundation stage: the service starts, connects to Kafka and the schema registry, serves
// /healthz, /readyz and /metrics, and stops cleanly. Its pipeline stage lands with issue #3/#4.
await runService({
  name: 'registry',
  port: 'registryPort',
  options: [],
  redis: true,
  start: async () => undefined,
});
