import type { ClientTls } from './tls.js';
import type { Logger } from '@reach/core';
import type { BackoffOptions } from './backoff.js';
import type { LocalReach } from './direct/local-reach.js';
import type { ReachMode } from './mode.js';
import type { DedupeOptions } from './dedupe.js';
import type { SessionContext } from './session.js';
import type { AgentDescriptor, Priority, ReachMessage, Receipt, SendFields } from './types.js';

/** Message types with a meaning to the SDK. */
export const TASK_REQUEST = 'task_request';
export const TASK_RESULT = 'task_result';
export const EVENT = 'event';
/** Failure receipts (packages/service-kit receipt.ts): never handed to handlers. */
export const RECEIPT = 'reach.receipt';
/** Header the dispatcher puts on a task_result: the handler's `ok` or `error` (named in @reach/core). */
export { RESULT_STATUS_HEADER } from '@reach/core';

export interface AgentNodeOptions {
  /**
   * `queued` (default): through Agent-Reach's services. `direct`: through an in-process
   * LocalReach, no infrastructure (README "Direct mode"). Unset: AGENT_REACH_MODE, else queued.
   */
  mode?: ReachMode;
  /** Direct mode: the LocalReach to join (a test environment's); default the process's shared one. */
  reach?: LocalReach;
  /** Registry base URL, e.g. http://127.0.0.1:7411. Needed in queued mode. */
  registryUrl?: string;
  /** Dispatcher WebSocket URL, e.g. ws://127.0.0.1:7412 (the /v1/connect path is added when missing). Needed in queued mode. */
  dispatcherUrl?: string;
  /** Ingress base URL, for `node.client()` (the HTTP API as this agent). */
  ingressUrl?: string;
  descriptor: AgentDescriptor;
  /** Enrollment (or admin) token for `POST /v1/agents`, when the registry needs one. */
  token?: string;
  /** A private CA for https/wss URLs (e.g. `{ ca: readFileSync('ca.pem') }`); unset: the system store. */
  tls?: ClientTls;
  logger?: Logger;
  /** How long start() waits for the first `welcome`. Default 10 s. */
  connectTimeoutMs?: number;
  /** Application ping interval. Default 15 s (R-C3). */
  pingIntervalMs?: number;
  /** A connection silent this long is dropped and re-opened. Default 30 s. */
  idleTimeoutMs?: number;
  /** Reconnect backoff. Default 1 s doubling to 32 s plus 0–20 % jitter (R-G1). */
  reconnect?: BackoffOptions;
  /** stop() waits this long for running handlers before giving up on them. Default 10 s. */
  drainTimeoutMs?: number;
  /** send() fails with 1001 when the dispatcher has not accepted the message by then. Default 10 s. */
  sendTimeoutMs?: number;
  /** Default timeout of request(). Default 30 s (the task_request budget of R-D2). */
  requestTimeoutMs?: number;
  /** The token is renewed (by re-registering) at this fraction of its lifetime. Default 0.8. */
  tokenRefreshRatio?: number;
  /** Redelivery dedupe cache bounds. Default 10 000 entries, 64 MiB, 30 min (R-G4). */
  dedupe?: DedupeOptions;
  /**
   * Send `progress` frames while a handler runs, so a handler longer than the ack window is
   * not retried elsewhere (default true). Off, a handler that outlives its ack deadline is
   * treated as a silent agent: the delivery is retried on another agent.
   */
  reportProgress?: boolean;
  /**
   * Pre-flight (R-G6): keep a local view of what this agent can reach (the dispatcher's
   * `routes` frames) and check `request()` against it — and `send()`/`publish()` when they ask —
   * failing fast with 2001, 2003 or 3001 without a round trip. Default true; false: no view, no check.
   */
  preflight?: boolean;
  /** stop() on SIGTERM/SIGINT, then re-raise the signal. Default true. */
  handleSignals?: boolean;
  /** Source of randomness for jitter. Default Math.random. */
  random?: () => number;
}

export interface SendOptions {
  sessionId?: string;
  headers?: Record<string, string>;
  priority?: Priority;
  idempotencyKey?: string;
  traceId?: string;
  /** W3C trace context to continue (sets trace_id too); inside a handler, the delivery's by default. */
  traceparent?: string;
  tags?: string[];
  /** publish(): check the topic against the local routes view first (R-G6; 2001, 2003, 3001 without sending). Default false. */
  preflight?: boolean;
}

export interface RequestOptions extends SendOptions {
  /** Default: the node's requestTimeoutMs (30 s). Also sent as the envelope's timeout_ms. */
  timeoutMs?: number;
  /** Context fragments to pass along (R-G3), by fragment name. */
  context?: Record<string, string>;
  /**
   * Check first and fail fast when the message would be refused (R-G6): against the local
   * routes view (2001, 2003, 3001; no round trip), or the registry before the view arrived
   * (2001). Default true (the node's `preflight`).
   */
  preflight?: boolean;
}

/** A request's answer with its context fragments. */
export interface Reply<T = unknown> {
  payload: T;
  /** The fragments sent, overlaid with those the handler updated. */
  context: Record<string, string>;
  /** Only the fragments the handler set. */
  updated: Record<string, string>;
  message: ReachMessage<T>;
}

/** What a handler may do with its node: talk to other agents. */
export interface AgentApi {
  readonly agentId: string | undefined;
  send(fields: SendFields, options?: { preflight?: boolean }): Promise<string>;
  publish(topic: string, payload: unknown, options?: SendOptions): Promise<string>;
  request<R = unknown>(capability: string, payload: unknown, options?: RequestOptions): Promise<R>;
  requestReply<R = unknown>(capability: string, payload: unknown, options?: RequestOptions): Promise<Reply<R>>;
}

/** What a handler gets besides the message. */
export interface HandlerContext {
  /** The delivery's sequence number on this agent's stream. */
  readonly seq: number;
  /** 0 on the first attempt, +1 on each retry. */
  readonly attempt: number;
  /** Epoch ms by which the dispatcher expects the ack, when it gave one. */
  readonly deadline: number | undefined;
  /**
   * The delivery's W3C traceparent (the dispatcher's dispatch span when tracing is on), for
   * the handler's own spans or outgoing calls; undefined when the dispatcher sent none.
   * Messages sent through `ctx.node` carry it on, so they join the same trace.
   */
  readonly traceparent: string | undefined;
  /** Context fragments passed with the task; fragments set here go back with the result (R-G3). */
  readonly session: SessionContext;
  /** A logger bound to the message's trace_id and message_id. */
  readonly log: Logger;
  /** Aborted when stop() gives up waiting for running handlers. */
  readonly signal: AbortSignal;
  /** The node, to send, publish or request (delegate) from inside a handler; what it sends continues this delivery's trace. */
  readonly node: AgentApi;
}

/**
 * A handler: its return value is the result (sent back when the message expects one); a throw
 * rejects the delivery — a ReachError (e.g. NonRetryableError) with its code and retryable
 * flag, anything else as 3003 AGENT_REJECTED, retryable.
 *
 * Handlers must be asynchronous. CPU-bound work belongs in a worker thread
 * (node:worker_threads): a handler that blocks the event loop also blocks heartbeats and
 * pings, and the registry will take the agent for dead.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Handler<P = any, R = unknown> = (msg: ReachMessage<P>, ctx: HandlerContext) => R | Promise<R>;

export interface NodeEvents {
  registered: { agent_id: string; lease_id: string };
  connected: { agent_id: string; connection_id: string };
  disconnected: { code: number; reason: string };
  /** A failure receipt for a message this node sent. */
  receipt: Receipt & { receipt_message_id: string };
  /** A newer connection of this agent took over (4001): the node stops, run() rejects with AgentReplacedError. */
  replaced: { agent_id: string };
  stopped: Record<string, never>;
}
