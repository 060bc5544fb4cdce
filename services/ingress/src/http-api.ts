import {
  bearer,
  errorInfo,
  isKnownCode,
  ReachError,
  toReachError,
  type Logger,
  ERROR,
  IDEMPOTENCY_KEY_HEADER,
  RETRY_AFTER_HEADER,
  TRACEPARENT_HEADER,
} from '@reach/core';
import { envelopeFromJson } from '@reach/envelope';
import { produceAll, type OutRecord, type Producer } from '@reach/kafka';
import type { HttpServer, Reply, Request } from '@reach/service-kit';
import { provisionalRow, type Acceptor } from './acceptance.js';
import type { Authenticator, Principal } from './auth.js';
import type { IdempotencyStore } from './idempotency.js';
import type { IngressMetrics } from './metrics.js';
import { isPartyByRow, mayRead, type ReadPolicy } from './read-access.js';
import { eventJson, messageJson, traceJson, type CopyRow, type EventRow, type MessageRow, type ReadModel } from './read-model.js';
import type { RecentMessages } from './recent.js';
import type { ResultWaiter } from './result-waiter.js';
import { effectiveWaitMs, isFannedOut, parseWaitMs } from './wait-policy.js';

/**
 * How long a request waits for Kafka to take its records. The producer retries forever (a
 * consume loop should wait out a broker outage); a request must not. A send that times out is
 * "maybe written": the sender's retry with the same idempotency key absorbs a duplicate.
 */
export const PRODUCE_TIMEOUT_MS = 10_000;

export interface MessageApiDeps {
  http: HttpServer;
  producer: Producer;
  acceptor: Acceptor;
  auth: Authenticator;
  idempotency: IdempotencyStore;
  readModel: ReadModel;
  recent: RecentMessages;
  waiter: ResultWaiter;
  metrics: IngressMetrics;
  service: string;
  instance: string;
  maxWaitMs: number;
  readPolicy: ReadPolicy;
  log: Logger;
}

function header(req: Request, name: string): string | undefined {
  const v = req.headers[name];
  const first = Array.isArray(v) ? v[0] : v;
  return first === undefined || first === '' ? undefined : first;
}

/** The error code of a refusal reply built by hand (the 429 with Retry-After). */
function errorCodeOf(reply: Reply): number {
  const code = (reply.body as { error?: { code?: unknown } } | undefined)?.error?.code;
  return typeof code === 'number' ? code : 0;
}

function notFound(what: string): Reply {
  return { status: 404, body: { error: { code: 404, name: 'NOT_FOUND', message: `${what} not found` } } };
}

export async function produceWithin(producer: Producer, records: readonly OutRecord[], ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ReachError('DEPENDENCY_UNAVAILABLE', `Kafka did not take the message within ${ms} ms`)), ms);
  });
  try {
    await Promise.race([produceAll(producer, records), timeout]);
  } catch (err) {
    const e = toReachError(err);
    throw e.codeName === 'INTERNAL' ? new ReachError('DEPENDENCY_UNAVAILABLE', `Kafka refused the message: ${e.message}`, { cause: err }) : e;
  } finally {
    clearTimeout(timer);
  }
}

/** The copies a fanned-out message became, as far as the read model has them. */
export interface FanoutCopies {
  readonly copies: readonly CopyRow[];
  readonly total: number;
}

/**
 * The answer to a wait that ended: the result, the copies of a fanned-out message (a topic
 * publish has no result of its own: each copy is answered under its own id), the message's own
 * failure, or 504 ACK_TIMEOUT.
 */
export function waitReply(messageId: string, row: MessageRow | undefined, timedOut: boolean, waitedMs: number, copies?: FanoutCopies): Reply {
  const status = row?.status ?? 'PENDING';
  if (row && row.result !== null && row.result !== undefined) {
    return { status: 200, body: { message_id: messageId, status, result: row.result } };
  }
  if (isFannedOut(row)) {
    return { status: 200, body: { message_id: messageId, status, ...(copies ? { copies: copies.copies, copies_total: copies.total } : {}) } };
  }
  if (!timedOut && row) {
    // REJECTED or DEAD: answer with the message's own failure code and its HTTP status.
    const code = row.code !== null && isKnownCode(row.code) ? row.code : ERROR.INTERNAL;
    const info = errorInfo(code);
    return {
      status: info.httpStatus,
      body: { error: { code, name: info.name, message: row.reason ?? info.description, details: { message_id: messageId, status } } },
    };
  }
  const info = errorInfo('ACK_TIMEOUT');
  return {
    status: info.httpStatus,
    body: {
      error: { code: info.code, name: info.name, message: `no result within ${waitedMs} ms (status ${status})`, details: { message_id: messageId, status } },
    },
  };
}

/**
 * The public message API of docs/design.md §3 on ingress: submit (`POST /v1/messages`, through the
 * same Acceptor as the Kafka path), and the read model queries (message, timeline, trace).
 */
export function registerMessageApi(d: MessageApiDeps): void {
  const reporter = { service: d.service, instance: d.instance };

  const currentStatus = async (messageId: string): Promise<string> => {
    let row: MessageRow | undefined;
    try {
      row = (await d.readModel.message(messageId)) ?? d.recent.get(messageId)?.message;
    } catch (err) {
      d.log.warn({ err, message_id: messageId }, 'read model unavailable; reporting a duplicate as PENDING');
    }
    // Not in the read model (yet): it was accepted, since a key is only taken by an accepted message.
    return row?.status ?? 'PENDING';
  };

  const awaitResult = async (who: Principal, messageId: string, waitMs: number): Promise<Reply> => {
    const started = Date.now();
    const { row, timedOut } = await d.waiter.wait(messageId, waitMs, started);
    // A result is read like the message itself (the waiter only has its row: no timeline).
    if (row && !mayRead(who, row, [], d.readPolicy)) return notFound(`message ${messageId}`);
    const copies = isFannedOut(row) ? await copiesOf(messageId) : undefined;
    return waitReply(messageId, row, timedOut, Date.now() - started, copies);
  };

  /** The copies of a fanned-out message, for its wait's answer; without them when the read model fails (the answer stands). */
  const copiesOf = async (messageId: string): Promise<FanoutCopies | undefined> => {
    try {
      return await d.readModel.copies(messageId);
    } catch (err) {
      d.log.warn({ err, message_id: messageId }, 'could not list the copies of a fanned-out message; answering without them');
      return undefined;
    }
  };

  const submit = async (req: Request): Promise<Reply> => {
    const received = performance.now();
    const token = bearer(req.headers.authorization);
    const principal = d.auth.authenticate(token);
    const requestedWait = parseWaitMs(req.query.get('wait_ms'));
    const traceparent = header(req, TRACEPARENT_HEADER);
    const idempotencyKey = header(req, IDEMPOTENCY_KEY_HEADER);
    const now = Date.now();
    const envelope = envelopeFromJson(await req.json(), {
      producer: principal.agentId,
      now,
      ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
      ...(traceparent !== undefined ? { traceparent } : {}),
    });
    const waitMs = requestedWait === undefined ? undefined : effectiveWaitMs(requestedWait, envelope.timeout_ms, d.maxWaitMs);
    const acceptance = await d.acceptor.accept({ envelope, token, via: { kind: 'http' }, traceparent }, now);
    d.metrics.count('http', acceptance);

    switch (acceptance.outcome) {
      case 'rejected': {
        // Answered here and nowhere else (issue #13): no dead letter, no status row, so a
        // client hammering its quota cannot flood the DLQ; http_refusals_total counts it.
        const { error } = acceptance;
        const refusal = new ReachError(error.codeName, error.message, { details: { ...error.details, message_id: envelope.message_id } });
        // Over quota (4129): 429 with Retry-After, the seconds until the bucket holds a token again.
        const retryAfterS = error.details?.retry_after_s;
        if (typeof retryAfterS === 'number')
          return { status: refusal.httpStatus, body: refusal.toBody(), headers: { [RETRY_AFTER_HEADER]: String(retryAfterS) } };
        throw refusal;
      }
      case 'duplicate': {
        if (waitMs !== undefined) return awaitResult(principal, acceptance.originalId, waitMs);
        return { status: 200, body: { message_id: acceptance.originalId, status: await currentStatus(acceptance.originalId) } };
      }
      case 'accepted': {
        try {
          await produceWithin(d.producer, acceptance.records, PRODUCE_TIMEOUT_MS);
        } catch (err) {
          if (envelope.idempotency_key !== null) await d.idempotency.release(envelope.producer, envelope.idempotency_key, envelope.message_id);
          throw err;
        }
        d.metrics.ingested('http', (performance.now() - received) / 1000);
        const row = provisionalRow(envelope, 'PENDING', reporter, now);
        d.recent.remember(row.message, row.event, now);
        // debug: a line per message was the ingress's largest cost after the produce at a few
        // hundred msg/s; the timeline (GET /v1/messages/{id}/events) and metrics say the same.
        d.log.debug({ message_id: envelope.message_id, trace_id: envelope.trace_id, producer: envelope.producer }, 'message accepted');
        if (waitMs !== undefined) return awaitResult(principal, envelope.message_id, waitMs);
        return { status: 202, body: { message_id: envelope.message_id, status: 'PENDING' } };
      }
    }
  };

  /** Every HTTP refusal is counted (http_refusals_total), whichever check raised it. */
  d.http.route('POST', '/v1/messages', async (req) => {
    try {
      const reply = await submit(req);
      if (reply.status >= 400 && reply.status < 500) d.metrics.httpRefused(reply.status, errorCodeOf(reply));
      return reply;
    } catch (err) {
      const e = toReachError(err);
      if (e.httpStatus >= 400 && e.httpStatus < 500) d.metrics.httpRefused(e.httpStatus, e.code);
      throw e;
    }
  });

  /** The message if `who` may read it (read-access.ts), else undefined: unknown and hidden look alike. */
  const readable = async (who: Principal, id: string, withEvents: boolean): Promise<{ row: MessageRow; events: EventRow[] } | undefined> => {
    const recent = d.recent.get(id);
    const row = (await d.readModel.message(id)) ?? recent?.message;
    if (!row) return undefined;
    // The row alone decides for the admin, the producer, the last handler and the target: the
    // timeline is read only when it is wanted or may decide (an earlier handler, the domain).
    if (!withEvents && isPartyByRow(who, row)) return { row, events: [] };
    const stored = await d.readModel.events([id]);
    const events = stored.length > 0 ? stored : [...(recent?.events ?? [])];
    return mayRead(who, row, events, d.readPolicy) ? { row, events } : undefined;
  };

  d.http.route('GET', '/v1/messages/{id}', async (req) => {
    const who = d.auth.authenticate(bearer(req.headers.authorization));
    const id = req.params.id!;
    const found = await readable(who, id, false);
    return found ? { status: 200, body: messageJson(found.row) } : notFound(`message ${id}`);
  });

  d.http.route('GET', '/v1/messages/{id}/events', async (req) => {
    const who = d.auth.authenticate(bearer(req.headers.authorization));
    const id = req.params.id!;
    const found = await readable(who, id, true);
    if (!found) return notFound(`message ${id}`);
    return { status: 200, body: { message_id: id, events: found.events.map(eventJson) } };
  });

  d.http.route('GET', '/v1/traces/{trace_id}', async (req) => {
    const who = d.auth.authenticate(bearer(req.headers.authorization));
    const traceId = req.params.trace_id!;
    const all = await d.readModel.trace(traceId);
    const events = await d.readModel.events(all.map((r) => r.message_id));
    // Only the messages of the trace the caller may read; none → as if the trace did not exist.
    const rows = all.filter((r) =>
      mayRead(
        who,
        r,
        events.filter((e) => e.message_id === r.message_id),
        d.readPolicy,
      ),
    );
    if (rows.length === 0) return notFound(`trace ${traceId}`);
    const visible = new Set(rows.map((r) => r.message_id));
    return {
      status: 200,
      body: traceJson(
        traceId,
        rows,
        events.filter((e) => visible.has(e.message_id)),
      ),
    };
  });
}
