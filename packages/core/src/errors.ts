/**
 * The one table of Agent-Reach error codes (docs/design.md §6). Every failure the system reports —
 * HTTP error bodies, WebSocket `error` frames, close reasons, DLQ entries, receipts — carries
 * one of these codes. The README's error table is generated from this list and a test fails
 * when it is stale.
 */
export interface ErrorCodeInfo {
  readonly code: number;
  readonly name: string;
  /** May the same work succeed if tried again later? Drives retry-vs-DLQ decisions. */
  readonly retryable: boolean;
  /** HTTP status the public API answers with. */
  readonly httpStatus: number;
  readonly description: string;
}

const table = [
  { code: 1001, name: 'CONNECT_TIMEOUT', retryable: true, httpStatus: 504, description: 'Connecting to an agent or dependency timed out.' },
  {
    code: 1002,
    name: 'CONNECTION_CLOSED',
    retryable: true,
    httpStatus: 502,
    description: 'The connection to the agent closed before the delivery was acknowledged.',
  },
  {
    code: 1003,
    name: 'AUTH_FAILED',
    retryable: false,
    httpStatus: 401,
    description: "Missing, invalid, expired or revoked token, or a producer that is not the token's agent.",
  },
  { code: 1004, name: 'HEARTBEAT_TIMEOUT', retryable: true, httpStatus: 504, description: 'The agent stopped answering pings / heartbeats.' },
  { code: 2001, name: 'NO_ROUTE', retryable: false, httpStatus: 404, description: 'No live agent offers the requested capability, topic or agent id.' },
  {
    code: 2002,
    name: 'SATURATED',
    retryable: true,
    httpStatus: 503,
    description: 'Every candidate is above the saturation threshold and the sender asked for QUEUE_REQUEST.',
  },
  { code: 2003, name: 'DOMAIN_DENIED', retryable: false, httpStatus: 403, description: 'Delivery across security domains without a grant.' },
  { code: 3001, name: 'CIRCUIT_OPEN', retryable: true, httpStatus: 503, description: "The target agent's circuit breaker is open." },
  { code: 3002, name: 'ACK_TIMEOUT', retryable: true, httpStatus: 504, description: 'The agent did not acknowledge the delivery before its deadline.' },
  { code: 3003, name: 'AGENT_REJECTED', retryable: false, httpStatus: 422, description: 'The agent rejected the message.' },
  { code: 3004, name: 'RETRIES_EXHAUSTED', retryable: false, httpStatus: 502, description: 'Every allowed attempt failed.' },
  { code: 3005, name: 'BUDGET_EXCEEDED', retryable: false, httpStatus: 504, description: "The message's end-to-end time budget ran out." },
  { code: 3006, name: 'EXPIRED', retryable: false, httpStatus: 410, description: 'The message passed its expire_at.' },
  {
    code: 3007,
    name: 'CANCELED',
    retryable: false,
    httpStatus: 409,
    description: 'The sender canceled the message before it was delivered (A2A CancelTask); it ends DEAD with this code.',
  },
  {
    code: 4101,
    name: 'INVALID_ENVELOPE',
    retryable: false,
    httpStatus: 400,
    description: 'The envelope could not be decoded or breaks a rule (fields, exactly one target, types).',
  },
  {
    code: 4102,
    name: 'PAYLOAD_TOO_LARGE',
    retryable: false,
    httpStatus: 413,
    description: 'The payload exceeds the limit (256 KiB by default); send large data by reference.',
  },
  { code: 4103, name: 'UNKNOWN_SCHEMA', retryable: false, httpStatus: 400, description: 'The record names a schema id the registry does not know.' },
  { code: 4104, name: 'INVALID_REGISTRATION', retryable: false, httpStatus: 400, description: 'The agent descriptor is invalid; the message names the field.' },
  { code: 4129, name: 'RATE_LIMITED', retryable: true, httpStatus: 429, description: 'The producer is over its quota.' },
  { code: 5001, name: 'INTERNAL', retryable: true, httpStatus: 500, description: 'An unexpected internal error.' },
  {
    code: 5002,
    name: 'DEPENDENCY_UNAVAILABLE',
    retryable: true,
    httpStatus: 503,
    description: 'A dependency (Kafka, Redis, PostgreSQL, schema registry) is unavailable.',
  },
] as const satisfies readonly ErrorCodeInfo[];

export type ErrorName = (typeof table)[number]['name'];
export type ErrorCode = (typeof table)[number]['code'];

export const ERROR_CODES: readonly ErrorCodeInfo[] = table;

/**
 * Every code by its name, each typed as its literal number (`ERROR.ACK_TIMEOUT` is `3002`): code
 * uses these, never the bare number, so the table stays the one place a number is written.
 */
export const ERROR: { readonly [E in (typeof table)[number] as E['name']]: E['code'] } = Object.freeze(
  Object.fromEntries(table.map((e) => [e.name, e.code])) as { [E in (typeof table)[number] as E['name']]: E['code'] },
);

/** The code of `name`, typed as its literal number. */
export type CodeOf<N extends ErrorName> = (typeof ERROR)[N];

const byName = new Map<string, ErrorCodeInfo>(table.map((e) => [e.name, e]));
const byCode = new Map<number, ErrorCodeInfo>(table.map((e) => [e.code, e]));

/**
 * The agent code of a retryable reject that hands back work the agent never started (2002
 * SATURATED: it is stopping, or full). The SDKs send it on a graceful stop; the dispatcher
 * retries it elsewhere without counting it against the agent's circuit (docs/protocol.md).
 */
export const HAND_BACK_CODE = ERROR.SATURATED;

export function errorInfo(nameOrCode: ErrorName | ErrorCode | number): ErrorCodeInfo {
  const info = typeof nameOrCode === 'number' ? byCode.get(nameOrCode) : byName.get(nameOrCode);
  if (!info) throw new Error(`unknown error code ${String(nameOrCode)}`);
  return info;
}

export function isKnownCode(code: number): boolean {
  return byCode.has(code);
}

export interface ReachErrorOptions {
  cause?: unknown;
  /** Overrides the table's default, e.g. an agent's reject with `retryable: true`. */
  retryable?: boolean;
  /** Structured detail for the API body (e.g. the offending field). */
  details?: Record<string, unknown>;
}

/** The one error base class. `code` comes from the table above; `retryable` drives retries. */
export class ReachError extends Error {
  readonly code: ErrorCode;
  readonly codeName: ErrorName;
  readonly retryable: boolean;
  readonly httpStatus: number;
  readonly details: Record<string, unknown> | undefined;

  constructor(name: ErrorName, message: string, options: ReachErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    const info = errorInfo(name);
    this.name = 'ReachError';
    this.code = info.code as ErrorCode;
    this.codeName = name;
    this.retryable = options.retryable ?? info.retryable;
    this.httpStatus = info.httpStatus;
    this.details = options.details;
  }

  /** The public JSON error body of docs/design.md §3. */
  toBody(): { error: { code: number; name: string; message: string; details?: Record<string, unknown> } } {
    const body: { code: number; name: string; message: string; details?: Record<string, unknown> } = {
      code: this.code,
      name: this.codeName,
      message: this.message,
    };
    if (this.details) body.details = this.details;
    return { error: body };
  }
}

/** Thrown by handlers (and used internally) for failures that must never be retried. */
export class NonRetryableError extends ReachError {
  constructor(name: ErrorName, message: string, options: Omit<ReachErrorOptions, 'retryable'> = {}) {
    super(name, message, { ...options, retryable: false });
  }
}

/** Normalises anything thrown into a ReachError (unknown errors become INTERNAL, retryable). */
export function toReachError(err: unknown): ReachError {
  if (err instanceof ReachError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new ReachError('INTERNAL', message, { cause: err });
}
