import type { Logger } from '@reach/core';
import type { CircuitBreakers } from '@reach/circuits';

/**
 * How long acks are gathered per agent before they reach the shared breakers as one outcome
 * count. One script per ack (each reading every bucket of the agent's window) was ~7 % of the
 * dispatcher's CPU and most of Redis's at 600 msg/s; gathered, it is one call per agent per
 * window. A success can only keep a circuit closed (or close a half-open one), so recording it
 * this much later changes no decision that matters; failures are never held back.
 */
export const SUCCESS_FLUSH_MS = 250;

/**
 * Feeds every delivery outcome into the shared per-agent circuit breakers (R-D8, R-D13),
 * which routers read: an ack is a success; a missed ack deadline (3002) or a retryable reject
 * is a failure. A non-retryable reject is the agent refusing that message on purpose: it
 * answered, which is not ill health, so it counts like an ack (failures.ts isFinalRefusal).
 * Recording never delays a delivery or an ack: it is
 * fire-and-forget, and a Redis outage only costs breaker accuracy.
 */
export class CircuitRecorder {
  /** Acks not yet recorded, per agent. */
  private readonly successes = new Map<string, number>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly breakers: CircuitBreakers,
    private readonly log: Logger,
    flushMs = SUCCESS_FLUSH_MS,
  ) {
    this.timer = setInterval(() => this.flush(), flushMs);
    this.timer.unref();
  }

  record(agentId: string, ok: boolean): void {
    if (ok) {
      this.successes.set(agentId, (this.successes.get(agentId) ?? 0) + 1);
      return;
    }
    // The agent's earlier acks first, so the window sees outcomes in their order.
    this.flushAgent(agentId);
    this.send(agentId, false, 1);
  }

  /** Records every gathered ack now (also on shutdown). */
  flush(): void {
    for (const agentId of [...this.successes.keys()]) this.flushAgent(agentId);
  }

  stop(): void {
    clearInterval(this.timer);
    this.flush();
  }

  private flushAgent(agentId: string): void {
    const n = this.successes.get(agentId);
    if (n === undefined) return;
    this.successes.delete(agentId);
    this.send(agentId, true, n);
  }

  private send(agentId: string, ok: boolean, count: number): void {
    this.breakers.recordOutcome(agentId, ok, Date.now(), count).then(
      (r) => {
        if (r.transition) this.log.warn({ agent_id: agentId, from: r.transition.from, to: r.transition.to, reason: r.transition.reason }, 'circuit transition');
      },
      (err: unknown) => this.log.debug({ err, agent_id: agentId }, 'could not record a circuit outcome'),
    );
  }
}
