import { runService } from '@reach/service-kit';
import { startRegistry, REGISTRY_OPTIONS } from './registry.js';

// registry: agent records, leases, QoS and the public agent API; publishes reach.agents.v1 (docs/design.md §1).
// Agent tokens are signed here: without a signing key (REACH_TOKEN_SECRET, or the key ring of
// REACH_TOKEN_SECRETS[_FILE]) the service cannot do its job at all, so it requires 'tokenKeys':
// unset, it refuses to start the same way (exit 78) as for any other configuration error.
await runService({
  name: 'registry',
  port: 'registryPort',
  options: REGISTRY_OPTIONS,
  required: ['tokenKeys'],
  redis: true,
  postgres: true,
  start: startRegistry,
});
