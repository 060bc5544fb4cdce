import type { Logger } from '@reach/core';
import type { CircuitBreakers } from '@reach/circuits';

/**
 * Feeds every delivery outcome into the shared per-agent circuit breakers (SPEC R-D8, R-D13),
 * which routers read: an ack is a success; a missed ack deadline (3002) or a retryable reject
 * is a failure. A non-retryable reject is the agent refusing that message on purpose, not a
 * sign of ill health, and is not counted. Recording never delays a delivery or an ack: it is
 * fire-and-forget, and a Redis outage only costs breaker accuracy.
 */
export class CircuitRecorder {
  constructor(
    private readonly breakers: CircuitBreakers,
    private readonly log: Logger,
  ) {}

  record(agentId: string, ok: boolean): void {
    this.breakers.recordOutcome(agentId, ok).then(
      (r) => {
        if (r.transition) this.log.warn({ agent_id: agentId, from: r.transition.from, to: r.transition.to, reason: r.transition.reason }, 'circuit transition');
      },
      (err: unknown) => this.log.debug({ err, agent_id: agentId }, 'could not record a circuit outcome'),
    );
  }
}
