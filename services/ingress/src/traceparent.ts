import { childTraceparent, isValidTraceparent } from '@reach/tracing';

export { isValidTraceparent };

/**
 * The traceparent to carry on reach.pending.v1 (R-F1) when tracing is off (with tracing on,
 * the ingest span's own): the producer's when it sent a valid one, else one started from the
 * envelope's trace_id when that is a W3C trace id, so every hop downstream can join the same
 * trace. Undefined when the trace id is not W3C-shaped: a traceparent must never claim a
 * different trace than the envelope.
 */
export function traceparentFor(traceId: string, given: string | undefined): string | undefined {
  if (isValidTraceparent(given)) return given.trim();
  return childTraceparent(undefined, traceId);
}
