import { hasTokenKeyEnv, runService } from '@reach/service-kit';
import { startRegistry, REGISTRY_OPTIONS } from './registry.js';

// registry: agent records, leases, QoS and the public agent API; publishes reach.agents.v1 (docs/design.md §1).
// Agent tokens are signed here: without a signing key (REACH_TOKEN_SECRET, or the key ring of
// REACH_TOKEN_SECRETS[_FILE]) the service cannot do its job at all, so it refuses to start, the
// same way (exit 78) as for any other configuration error.
if (!hasTokenKeyEnv(process.env)) {
  process.stderr.write(
    'registry: REACH_TOKEN_SECRET is required, or REACH_TOKEN_SECRETS / REACH_TOKEN_SECRETS_FILE (the HMAC keys agent tokens are signed with; `reach up` generates one into .reach/token-secret)\n',
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
