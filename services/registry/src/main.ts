import { runService } from '@reach/service-kit';
import { startRegistry, REGISTRY_OPTIONS } from './registry.js';

// registry: agent records, leases, QoS and the public agent API; publishes reach.agents.v1 (DESIGN §1).
// Agent tokens are signed here: without REACH_TOKEN_SECRET the service cannot do its job at all,
// so it refuses to start, the same way (exit 78) as for any other configuration error.
if (!process.env.REACH_TOKEN_SECRET) {
  process.stderr.write(
    'registry: REACH_TOKEN_SECRET is required (the HMAC key agent tokens are signed with; `reach up` generates one into .reach/token-secret)\n',
  );
  process.exit(78);
}

await runService({
  name: 'registry',
  port: 'registryPort',
  options: REGISTRY_OPTIONS,
  redis: true,
  postgres: true,
  start: startRegistry,
});
