import { runService } from '@reach/service-kit';

// dispatcher: WebSocket gateway and HTTP push, seq/replay, acks, ack deadlines, circuit breakers (DESIGN §1).
// Foundation stage: the service starts, connects to Kafka and the schema registry, serves
// /healthz, /readyz and /metrics, and stops cleanly. Its pipeline stage lands with issue #3/#4.
await runService({
  name: 'dispatcher',
  port: 'dispatcherPort',
  options: [],
  redis: true,
  start: async () => undefined,
});
