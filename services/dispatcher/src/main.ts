import { runService } from '@reach/service-kit';
import { DISPATCHER_OPTIONS, startDispatcher } from './dispatcher.js';

// dispatcher: the WebSocket gateway and HTTP push, per-agent seq and replay, acks, rejects and
// results (docs/design.md §1, §4; R-C3…R-C10).
// The dispatcher verifies every hello's token: without a key it cannot admit any agent, so it
// requires 'tokenKeys' (unset: exit 78 at start).
await runService({
  name: 'dispatcher',
  port: 'dispatcherPort',
  options: DISPATCHER_OPTIONS,
  required: ['tokenKeys'],
  redis: true,
  postgres: true,
  start: startDispatcher,
});
