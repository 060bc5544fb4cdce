import { runService } from '@reach/service-kit';
import { DISPATCHER_OPTIONS, startDispatcher } from './dispatcher.js';

// dispatcher: the WebSocket gateway and HTTP push, per-agent seq and replay, acks, rejects and
// results (DESIGN §1, §4; SPEC R-C3…R-C10).
await runService({
  name: 'dispatcher',
  port: 'dispatcherPort',
  options: DISPATCHER_OPTIONS,
  required: ['tokenSecret'],
  redis: true,
  postgres: true,
  start: startDispatcher,
});
