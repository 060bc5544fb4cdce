import { randomBytes } from 'node:crypto';

const TRACEPARENT = /^([\da-f]{2})-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})$/;
const TRACE_ID = /^[\da-f]{32}$/;

/** A W3C traceparent that is well formed (version ff and all-zero ids are invalid per the spec). */
export function isValidTraceparent(value: string | undefined): value is string {
  if (!value) return false;
  const m = TRACEPARENT.exec(value.trim());
  return m !== null && m[1] !== 'ff' && !/^0+$/.test(m[2]!) && !/^0+$/.test(m[3]!);
}

/**
 * The traceparent to carry on reach.pending.v1 (R-F1): the producer's own when it sent a valid
 * one, else one started from the envelope's trace_id when that is a W3C trace id, so every hop
 * downstream can join the same trace. Undefined when the trace id is not W3C-shaped: a
 * traceparent must never claim a different trace than the envelope.
 */
export function traceparentFor(traceId: string, given: string | undefined): string | undefined {
  if (isValidTraceparent(given)) return given.trim();
  const id = traceId.toLowerCase();
  if (!TRACE_ID.test(id) || /^0+$/.test(id)) return undefined;
  return `00-${id}-${randomBytes(8).toString('hex')}-01`;
}
