import { ReachError, errorInfo, isKnownCode, type ErrorName, ERROR } from '@reach/core';
import { RESULT_STATUS_HEADER, type Reply } from './node-types.js';
import { payloadBytes } from './payload.js';
import { contextFromHeaders } from './session.js';
import type { ReachMessage, Receipt } from './types.js';

/** The ReachError for a code from the wire (a frame or a receipt); unknown codes become INTERNAL. */
export function errorForCode(code: number, message: string, details?: Record<string, unknown>): ReachError {
  const name = (isKnownCode(code) ? errorInfo(code).name : 'INTERNAL') as ErrorName;
  return new ReachError(name, message, { details });
}

interface Pending {
  capability: string;
  context: Record<string, string>;
  resolve: (reply: Reply) => void;
  reject: (err: ReachError) => void;
  timer: NodeJS.Timeout;
}

/**
 * Requests waiting for their answer (R-C9): keyed by the request's message id, which the
 * answer carries as correlation_id — a `task_result` resolves it, a `reach.receipt` (the
 * request was rejected or died) rejects it with the receipt's code, the timer with 3002.
 */
export class PendingRequests {
  private readonly pending = new Map<string, Pending>();

  /** Starts waiting; the timer runs from now, so it bounds sending and answering together. */
  wait<R>(messageId: string, capability: string, context: Record<string, string>, timeoutMs: number): Promise<Reply<R>> {
    return new Promise<Reply<R>>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(messageId);
        reject(
          new ReachError('ACK_TIMEOUT', `no result for ${messageId} (${capability}) within ${timeoutMs} ms`, {
            details: { message_id: messageId, capability },
          }),
        );
      }, timeoutMs);
      this.pending.set(messageId, { capability, context, resolve: resolve as (r: Reply) => void, reject, timer });
    });
  }

  has(messageId: string): boolean {
    return this.pending.has(messageId);
  }

  /** Stops waiting without settling (the request could not be sent; the caller has the error). */
  forget(messageId: string): void {
    const p = this.take(messageId);
    if (p) clearTimeout(p.timer);
  }

  /** A task_result for `m.correlation_id`: resolves it, or rejects it when the handler answered `error`. */
  settleResult(m: ReachMessage): boolean {
    const p = m.correlation_id ? this.take(m.correlation_id) : undefined;
    if (!p) return false;
    if (m.headers[RESULT_STATUS_HEADER] === 'error') {
      p.reject(new ReachError('AGENT_REJECTED', `${p.capability} answered with an error`, { details: { message_id: m.correlation_id, payload: m.payload } }));
      return true;
    }
    const updated = contextFromHeaders(m.headers);
    // A binary result (a handler that returned bytes) comes as payload_b64: it resolves as a Buffer.
    p.resolve({ payload: payloadBytes(m) ?? m.payload ?? null, context: { ...p.context, ...updated }, updated, message: m });
    return true;
  }

  /** A failure receipt: rejects the request it is about, if one waits. */
  settleReceipt(receipt: Receipt): void {
    const p = this.take(receipt.message_id);
    if (!p) return;
    const message = `${p.capability}: ${receipt.status} ${receipt.name} ${receipt.reason}`.trim();
    p.reject(errorForCode(receipt.code, message, { message_id: receipt.message_id, status: receipt.status }));
  }

  failAll(err: ReachError): void {
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      this.pending.delete(id);
      p.reject(err);
    }
  }

  private take(messageId: string): Pending | undefined {
    const p = this.pending.get(messageId);
    if (!p) return undefined;
    clearTimeout(p.timer);
    this.pending.delete(messageId);
    return p;
  }
}

/** The receipt a `reach.receipt` message carries (payload of packages/service-kit receiptRecord). */
export function receiptOf(m: ReachMessage): Receipt & { receipt_message_id: string } {
  const body = (m.payload ?? {}) as Partial<Receipt>;
  return {
    message_id: m.correlation_id ?? body.message_id ?? '',
    status: body.status ?? 'REJECTED',
    code: typeof body.code === 'number' ? body.code : ERROR.INTERNAL,
    name: body.name ?? '',
    reason: body.reason ?? '',
    receipt_message_id: m.message_id,
  };
}
