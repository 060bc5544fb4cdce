import { runService } from '@reach/service-kit';

// router: rules, candidate filter, scoring, stickiness, saturation queue; reach.pending.v1 → reach.routed.v1 (DESIGN §1).
// Foundation stage: the service starts, connects to Kafka and the schema registry, serves
// /healthz, /readyz and /metrics, and stops cleanly. Its pipeline stage lands with issue #3/#4.
await runService({
  name: 'router',
  port: 'routerPort',
  options: [],
  redis: true,
  start: async () => undefined,
});
