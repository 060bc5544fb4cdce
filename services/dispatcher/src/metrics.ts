import { Gauge, type Counter } from 'prom-client';
import type { ServiceMetrics } from '@reach/service-kit';

/** The dispatcher's own metrics, `reach_dispatcher_*` (DESIGN §8), with bounded labels only. */
export interface DispatcherMetrics {
  connections: Gauge;
  connects: Counter;
  authFailures: Counter;
  closes: Counter<'code'>;
  routed: Counter;
  deliveriesSent: Counter;
  replayedFrames: Counter;
  acks: Counter;
  rejects: Counter;
  results: Counter;
  sends: Counter<'outcome'>;
  slowDisconnects: Counter;
  failedSends: Counter;
  httpPushes: Counter<'outcome'>;
  ackTimeouts: Counter;
  lateAnswers: Counter<'kind'>;
  retriesScheduled: Counter<'code'>;
  deaths: Counter<'code'>;
}

export function dispatcherMetrics(m: ServiceMetrics): DispatcherMetrics {
  return {
    connections: new Gauge({
      name: `${m.prefix}connections`,
      help: 'Authenticated agent WebSocket connections held by this instance.',
      registers: [m.registry],
    }),
    connects: m.counter('connects_total', 'Agent WebSocket connections that authenticated.'),
    authFailures: m.counter('auth_failures_total', 'WebSocket connections closed with 4003 (bad, expired or missing token, or no hello in time).'),
    closes: m.counter('closes_total', 'WebSocket connections closed, by close code.', ['code']),
    routed: m.counter('routed_deliveries_total', 'Routed deliveries consumed and written to a replay buffer.'),
    deliveriesSent: m.counter('deliveries_sent_total', 'deliver frames sent over WebSockets (live and replayed).'),
    replayedFrames: m.counter('replayed_frames_total', 'deliver frames replayed to a (re)connecting agent.'),
    acks: m.counter('acks_total', 'Deliveries acknowledged by agents (DELIVERED).'),
    rejects: m.counter('rejects_total', 'Deliveries rejected by agents (REJECTED, 3003).'),
    results: m.counter('results_total', 'Handler results received from agents.'),
    sends: m.counter('sends_total', 'send frames from agents, by outcome (accepted, error).', ['outcome']),
    slowDisconnects: m.counter('slow_disconnects_total', 'Connections closed because their outbound buffer exceeded REACH_WS_MAX_BUFFERED_BYTES.'),
    failedSends: m.counter('failed_sends_total', 'Connections dropped because a send on them failed (SPEC R-C4).'),
    httpPushes: m.counter('http_pushes_total', 'HTTP pushes to agent endpoints, by outcome (ack, reject, failure, dropped).', ['outcome']),
    ackTimeouts: m.counter('ack_timeouts_total', 'Deliveries whose ack deadline passed (3002): failed attempts.'),
    lateAnswers: m.counter('late_answers_total', 'Acks and rejects for deliveries no longer pending (after their deadline, or repeated), ignored; by kind.', [
      'kind',
    ]),
    retriesScheduled: m.counter('retries_scheduled_total', 'Failed attempts sent to reach.retry.v1, by failure code.', ['code']),
    deaths: m.counter('dead_total', 'Messages declared DEAD after a failed attempt, by code (3004, 3005, 3006).', ['code']),
  };
}
