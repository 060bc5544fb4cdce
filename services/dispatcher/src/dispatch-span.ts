import type { SpanError, Tracer } from '@reach/tracing';
import type { DeliveryTrace, EntryHead } from './entry.js';

/**
 * The `dispatch` span (R-F1): from the routed delivery's arrival at the dispatcher to the
 * agent's answer (ack, result, reject) or the failure that ends the attempt (missed ack
 * deadline, waited out). Its identity is reserved when the delivery is consumed — the deliver
 * frame carries it, so what the agent does next is its child — and it is recorded wherever
 * the answer arrives, from the buffer entry's head.
 */
export type DispatchOutcome = 'ack' | 'result' | 'reject' | 'timeout' | 'connection_lost' | 'wait_expired';

/** The trace context a consumed delivery is buffered with. */
export function deliveryTrace(tracer: Tracer, incoming: string | undefined, traceId: string, now: number): DeliveryTrace {
  if (!tracer.enabled) return { traceparent: incoming };
  const own = tracer.reserve(incoming, traceId);
  return own === undefined ? { traceparent: incoming } : { traceparent: own, parent: incoming, startedAt: now };
}

export function recordDispatchSpan(
  tracer: Tracer,
  head: EntryHead,
  agent: string,
  outcome: DispatchOutcome,
  extra: { seq?: number | undefined; error?: SpanError | undefined } = {},
  now: number = Date.now(),
): void {
  if (!tracer.enabled || !head.tp || typeof head.t0 !== 'number') return;
  tracer.record('dispatch', {
    traceparent: head.tp,
    parent: head.tpp ?? undefined,
    kind: 'producer',
    startTime: head.t0,
    endTime: now,
    error: extra.error,
    attributes: {
      'reach.message_id': head.mid,
      'reach.parent_message_id': head.parent,
      'reach.agent_id': agent,
      'reach.attempt': head.attempt,
      'reach.seq': extra.seq,
      'reach.dispatch.outcome': outcome,
    },
  });
}
