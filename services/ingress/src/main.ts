import { runService } from '@reach/service-kit';
import { startKafkaIngress } from './kafka-ingress.js';

// ingress: validation, auth, quotas, idempotency and the public message API (DESIGN §1).
await runService({
  name: 'ingress',
  port: 'ingressPort',
  options: [],
  start: startKafkaIngress,
});
