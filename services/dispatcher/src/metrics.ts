import { Gauge, type Counter, type Histogram } from 'prom-client';
import type { ServiceMetrics } from '@reach/service-kit';

/** The dispatcher's own metrics, `reach_dispatcher_*` (docs/design.md §8), with bounded labels only. */
export interface DispatcherMetrics {
  connections: Gauge;
  connects: Counter;
  connectAttempts: Counter<'outcome'>;
  authFailures: Counter;
  dispatchSeconds: Histogram<'outcome'>;
  batchPhaseSeconds: Histogram<'phase'>;
  batchRecords: Histogram;
  /** The service-wide poison counter (ServiceMetrics.poisonRecords). */
  poisonRecords: ServiceMetrics['poisonRecords'];
  closes: Counter<'code'>;
  routed: Counter;
  deliveriesSent: Counter;
  replayedFrames: Counter;
  acks: Counter;
  rejects: Counter;
  results: Counter;
  refusedResults: Counter;
  sends: Counter<'outcome'>;
  slowDisconnects: Counter;
  failedSends: Counter;
  httpPushes: Counter<'outcome'>;
  ackTimeouts: Counter;
  lateAnswers: Counter<'kind'>;
  retriesScheduled: Counter<'code'>;
  deaths: Counter<'code'>;
  queued: Counter<'priority'>;
  promotions: Counter<'priority'>;
  deliveringEvents: Counter<'with'>;
  waitSeconds: Histogram<'priority'>;
  waitExpired: Counter<'priority'>;
}

export function dispatcherMetrics(m: ServiceMetrics): DispatcherMetrics {
  return {
    poisonRecords: m.poisonRecords,
    connections: new Gauge({
      name: `${m.prefix}connections`,
      help: 'Authenticated agent WebSocket connections held by this instance.',
      registers: [m.registry],
    }),
    connects: m.counter('connects_total', 'Agent WebSocket connections that authenticated.'),
    connectAttempts: m.counter(
      'connect_attempts_total',
      'WebSocket handshakes on /v1/connect by how they ended: connected (welcome sent), auth_failed (4003 before welcome), unavailable (5002), aborted (closed or replaced before welcome).',
      ['outcome'],
    ),
    dispatchSeconds: m.histogram(
      'dispatch_duration_seconds',
      'Dispatch stage: from a deliver frame being sent on a socket to the agent acking or rejecting it, by outcome.',
      ['outcome'],
      [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    ),
    batchPhaseSeconds: m.histogram(
      'routed_batch_phase_seconds',
      'Each step of handling one batch of routed deliveries (append = the buffer script, produce = the DELIVERING events, announce = sending the deliver frames, lost_check = agents whose socket died): where a delivery waits before it is sent.',
      ['phase'],
      [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    ),
    batchRecords: m.histogram('routed_batch_records', 'Routed deliveries per handled batch.', [], [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]),
    authFailures: m.counter('auth_failures_total', 'WebSocket connections closed with 4003 (bad, expired or missing token, or no hello in time).'),
    closes: m.counter('closes_total', 'WebSocket connections closed, by close code.', ['code']),
    routed: m.counter('routed_deliveries_total', 'Routed deliveries consumed and written to a replay buffer.'),
    deliveriesSent: m.counter('deliveries_sent_total', 'deliver frames sent over WebSockets (live and replayed).'),
    replayedFrames: m.counter('replayed_frames_total', 'deliver frames replayed to a (re)connecting agent.'),
    acks: m.counter('acks_total', 'Deliveries made DELIVERED by their agent: acked, or answered by a result before the ack (once per delivery).'),
    rejects: m.counter('rejects_total', 'Deliveries rejected by agents (REJECTED, 3003).'),
    results: m.counter('results_total', 'Handler results received from agents.'),
    refusedResults: m.counter('refused_results_total', 'Handler results refused (4102 over the payload limit, 4101 text that cannot be stored), by code.', [
      'code',
    ]),
    sends: m.counter('sends_total', 'send frames from agents, by outcome (accepted, error).', ['outcome']),
    slowDisconnects: m.counter(
      'slow_disconnects_total',
      'Connections closed as slow: their outbound buffer did not drain for REACH_WS_SLOW_AFTER_MS, or exceeded REACH_WS_MAX_BUFFERED_BYTES.',
    ),
    failedSends: m.counter('failed_sends_total', 'Connections dropped because a send on them failed (R-C4).'),
    httpPushes: m.counter('http_pushes_total', 'HTTP pushes to agent endpoints, by outcome (ack, reject, failure, dropped).', ['outcome']),
    ackTimeouts: m.counter('ack_timeouts_total', 'Deliveries whose ack deadline passed (3002): failed attempts.'),
    lateAnswers: m.counter(
      'late_answers_total',
      'Answers (ack, reject, result) to deliveries whose attempt had already ended (its ack deadline passed, or DEAD past its budget), ignored; at most one per delivery, repeats of an answer are not counted; by kind.',
      ['kind'],
    ),
    retriesScheduled: m.counter('retries_scheduled_total', 'Failed attempts sent to reach.retry.v1, by failure code.', ['code']),
    deaths: m.counter('dead_total', 'Messages declared DEAD after a failed attempt, by code (3004, 3005, 3006).', ['code']),
    // Waiting now, cluster-wide = sum over instances of queued − promotions − wait_expired.
    queued: m.counter(
      'waiting_deliveries_total',
      'Routed deliveries that found their agent at its max_concurrency and started waiting in its priority lane, by priority.',
      ['priority'],
    ),
    promotions: m.counter('promotions_total', 'Waiting deliveries given a free slot of their agent and sent, by priority.', ['priority']),
    deliveringEvents: m.counter(
      'delivering_events_total',
      'DELIVERING events of sent deliveries (sent-ledger.ts): produced with their outcome (with=outcome), or alone for a delivery still unanswered 250 ms after it was sent (with=alone).',
      ['with'],
    ),
    waitSeconds: m.histogram(
      'wait_duration_seconds',
      'How long promoted deliveries waited for a free slot of their agent, by priority.',
      ['priority'],
      [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    ),
    waitExpired: m.counter(
      'wait_expired_total',
      'Waiting deliveries whose budget or expire_at passed before a slot freed (failed: DEAD 3005/3006 or retried elsewhere), by priority.',
      ['priority'],
    ),
  };
}
