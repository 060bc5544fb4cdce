import { hasTokenKeyEnv, runService } from '@reach/service-kit';
import { DISPATCHER_OPTIONS, startDispatcher } from './dispatcher.js';

// dispatcher: the WebSocket gateway and HTTP push, per-agent seq and replay, acks, rejects and
// results (docs/design.md §1, §4; R-C3…R-C10).
// The dispatcher verifies every hello's token: without a key it cannot admit any agent.
if (!hasTokenKeyEnv(process.env)) {
  process.stderr.write('dispatcher: REACH_TOKEN_SECRET must be set (or REACH_TOKEN_SECRETS / REACH_TOKEN_SECRETS_FILE)\n');
  process.exit(78);
}

await runService({
  name: 'dispatcher',
  port: 'dispatcherPort',
  options: DISPATCHER_OPTIONS,
  redis: true,
  postgres: true,
  start: startDispatcher,
});
