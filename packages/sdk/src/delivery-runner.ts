import { HAND_BACK_CODE, ReachError, errorInfo, isKnownCode, type Logger, ERROR } from '@reach/core';
import { DedupeCache, dedupeKey, type DedupeOptions, type Outcome } from './dedupe.js';
import type { AgentFrame, DeliverFrame } from './frames.js';
import { LoadTracker } from './load.js';
import { TASK_RESULT, type AgentApi, type Handler, type HandlerContext } from './node-types.js';
import { encodePayload } from './payload.js';
import { SessionContext, contextToHeaders } from './session.js';
import { continuingApi } from './trace-context.js';
import type { LoadReport, ReachMessage } from './types.js';
import { WorkQueue } from './work-queue.js';

/** Largest result payload: it becomes the payload of a task_result envelope (R-D10). */
const MAX_RESULT_BYTES = 256 * 1024;

interface Failure {
  code: number;
  reason: string;
  retryable: boolean;
}

interface Job {
  frame: DeliverFrame;
  key: string;
  handler: Handler;
}

export interface DeliveryRunnerDeps {
  maxConcurrency: number;
  dedupe?: DedupeOptions;
  /** Send `progress` frames while handlers run (default true). */
  reportProgress?: boolean;
  log: Logger;
  agentId: () => string | undefined;
  /** Writes a frame to the dispatcher (or keeps it until the next connection). */
  send: (frame: AgentFrame) => void;
  /** What handlers get as `ctx.node`. */
  api: AgentApi;
  /** Aborted when the node gives up on running handlers. */
  signal: AbortSignal;
  /** A handler started or ended (the heartbeat's current_load changed). */
  onLoadChanged?: () => void;
}

/** A version-pinned capability `name@major` is served by the handler of `name` when none is registered for the pin. */
function unversioned(name: string): string {
  const at = name.lastIndexOf('@');
  return at > 0 ? name.slice(0, at) : name;
}

/** What a handler's throw means on the wire: a ReachError keeps its code and retryable flag; anything else is 3003, retryable. */
export function failureOf(err: unknown): Failure {
  if (err instanceof ReachError) return { code: err.code, reason: err.message, retryable: err.retryable };
  // A ReachError from another copy of @reach/core is recognised by its shape.
  const e = err as { code?: unknown; retryable?: unknown; message?: unknown } | null;
  if (e && typeof e.code === 'number' && isKnownCode(e.code) && typeof e.retryable === 'boolean') {
    return { code: e.code, reason: typeof e.message === 'string' ? e.message : errorInfo(e.code).name, retryable: e.retryable };
  }
  return { code: ERROR.AGENT_REJECTED, reason: err instanceof Error ? err.message : String(err), retryable: true };
}

/**
 * A result must fit in a task_result envelope: at most 256 KiB of payload as the protocol
 * counts it (the bytes of a Buffer, the UTF-8 JSON text of anything else; never the base64 text
 * or the frame). A larger one is refused here, as the dispatcher would refuse it, with the same
 * words: the node rejects the delivery (final), so the sender learns at once.
 */
function checkResult(value: unknown): Failure | undefined {
  let bytes: number;
  if (value instanceof Uint8Array) bytes = value.byteLength;
  else {
    let json: string | undefined;
    try {
      json = JSON.stringify(value ?? null);
    } catch (err) {
      return { code: ERROR.AGENT_REJECTED, reason: `result is not JSON-serialisable: ${err instanceof Error ? err.message : String(err)}`, retryable: false };
    }
    bytes = Buffer.byteLength(json ?? 'null');
  }
  if (bytes <= MAX_RESULT_BYTES) return undefined;
  return {
    code: ERROR.PAYLOAD_TOO_LARGE,
    reason: `result refused: 4102 PAYLOAD_TOO_LARGE: result payload is ${bytes} bytes; the limit is ${MAX_RESULT_BYTES}`,
    retryable: false,
  };
}

/** The delivery's traceparent, echoed on its answer frames (an optional field of docs/design.md §4). */
function traceOf(d: DeliverFrame): { traceparent?: string } {
  return d.traceparent ? { traceparent: d.traceparent } : {};
}

/** A capability request or anything with reply_to is answered with a result; topic events are not. */
function expectsResult(m: ReachMessage): boolean {
  return m.reply_to !== null || m.capability !== null;
}

/**
 * How often a running handler reports progress: a third of the delivery's ack window (from its
 * deadline), so two reports can be lost before the deadline passes; between 0.5 s and 10 s.
 */
export function progressIntervalMs(d: Pick<DeliverFrame, 'deadline'>, now: number = Date.now()): number {
  const window = d.deadline === undefined ? Number.NaN : d.deadline - now;
  if (!Number.isFinite(window)) return 3_000;
  return Math.min(10_000, Math.max(500, Math.floor(window / 3)));
}

/**
 * Runs deliveries through their handlers: at most max_concurrency at once (the rest wait in a
 * local queue), answers each with result + ack or a reject, and dedupes redeliveries
 * (R-G2) — a message already handled is answered from the cache, one still running is answered
 * when that run ends. Its queue and outcomes are the load that heartbeats report.
 */
export class DeliveryRunner {
  private readonly handlers = new Map<string, Handler>();
  private readonly subscriptions = new Map<string, Handler>();
  private direct: Handler | undefined;
  private readonly queue: WorkQueue<Job>;
  private readonly dedupe: DedupeCache;
  private readonly outcomes = new LoadTracker();
  /** Dedupe key → redeliveries that arrived while the first delivery runs or waits. */
  private readonly inFlight = new Map<string, DeliverFrame[]>();
  private accepting = true;

  constructor(private readonly deps: DeliveryRunnerDeps) {
    this.queue = new WorkQueue<Job>(deps.maxConcurrency, (job) => this.run(job), deps.onLoadChanged);
    this.dedupe = new DedupeCache(deps.dedupe);
  }

  handle(capability: string, handler: Handler): void {
    this.handlers.set(capability, handler);
  }

  subscribe(topic: string, handler: Handler): void {
    this.subscriptions.set(topic, handler);
  }

  setDirect(handler: Handler): void {
    this.direct = handler;
  }

  get capabilityNames(): string[] {
    return [...this.handlers.keys()];
  }

  get topicNames(): string[] {
    return [...this.subscriptions.keys()];
  }

  get running(): number {
    return this.queue.running;
  }

  load(): LoadReport {
    return this.outcomes.snapshot(this.queue.running, this.queue.queued);
  }

  /** Takes one delivery meant for a handler. */
  accept(d: DeliverFrame, log: Logger): void {
    const m = d.message;
    if (!this.accepting) {
      this.reject(d, HAND_BACK_CODE, 'agent is stopping', true);
      return;
    }
    const key = dedupeKey(m);
    const earlier = this.dedupe.get(key);
    if (earlier) {
      log.info({ attempt: d.attempt }, 'redelivery of a handled message: answering with the earlier outcome');
      this.answer(d, earlier);
      return;
    }
    const running = this.inFlight.get(key);
    if (running) {
      log.info({ attempt: d.attempt }, 'redelivery of a message in progress: it will be answered when the handler finishes');
      running.push(d);
      return;
    }
    const handler = this.handlerFor(m);
    if (!handler) {
      if (m.message_type === TASK_RESULT) {
        // A reply whose request already timed out: nothing waits for it any more.
        log.debug('late task_result without a waiting request: acknowledged');
        this.ack(d);
        return;
      }
      const direct = !m.capability && !m.topic;
      log.warn({ capability: m.capability, topic: m.topic }, 'no handler for this delivery');
      // Another agent may serve the capability; a message addressed to this agent has nowhere else to go.
      this.reject(d, ERROR.AGENT_REJECTED, `agent ${this.deps.agentId() ?? ''} has no handler for ${m.capability ?? m.topic ?? m.message_type}`, !direct);
      return;
    }
    this.inFlight.set(key, []);
    this.queue.push({ frame: d, key, handler });
  }

  /** Stops taking work: deliveries that have not started go back to the dispatcher (retryable) for another agent. */
  stopAccepting(): void {
    this.accepting = false;
    for (const job of this.queue.takeQueued())
      this.finish(job, undefined, { code: HAND_BACK_CODE, reason: 'agent is stopping', retryable: true }, this.deps.log);
  }

  /** Resolves when no handler runs any more. */
  idle(): Promise<void> {
    return this.queue.idle();
  }

  ack(d: DeliverFrame): void {
    this.deps.send({ type: 'ack', seq: d.seq, message_id: d.message.message_id, ...traceOf(d) });
  }

  reject(d: DeliverFrame, code: number, reason: string, retryable: boolean): void {
    this.deps.send({ type: 'reject', seq: d.seq, message_id: d.message.message_id, code, reason: reason.slice(0, 1000), retryable, ...traceOf(d) });
  }

  private handlerFor(m: ReachMessage): Handler | undefined {
    if (m.capability) return this.handlers.get(m.capability) ?? this.handlers.get(unversioned(m.capability));
    if (m.topic) return this.subscriptions.get(m.topic);
    return this.direct;
  }

  private async run(job: Job): Promise<void> {
    const d = job.frame;
    const m = d.message;
    const log = this.deps.log.child({ agent_id: this.deps.agentId(), trace_id: m.trace_id, message_id: m.message_id, seq: d.seq });
    const session = new SessionContext(m.headers, m.session_id);
    const ctx: HandlerContext = {
      seq: d.seq,
      attempt: d.attempt,
      deadline: d.deadline,
      traceparent: d.traceparent,
      session,
      log,
      signal: this.deps.signal,
      node: continuingApi(this.deps.api, d),
    };
    const started = performance.now();
    let outcome: Outcome | undefined;
    let failure: Failure | undefined;
    // A handler longer than the ack window must not look dead: `progress` frames keep moving the
    // delivery's deadline while it runs, so it is never retried on another agent meanwhile.
    const progress =
      this.deps.reportProgress === false
        ? undefined
        : setInterval(() => this.deps.send({ type: 'progress', seq: d.seq, message_id: m.message_id }), progressIntervalMs(d));
    progress?.unref();
    // A final refusal the handler chose (NonRetryableError: bad input) is the agent working as it
    // should: it must not lower the health the heartbeats report. Two of them took an agent to
    // health 0, COOLDOWN and 2001 for its senders (issue 25). A crash, a retryable failure or a
    // result the node cannot send still counts.
    let refused = false;
    try {
      const value = await job.handler(m, ctx);
      outcome = { kind: 'ok', payload: value === undefined ? null : value, headers: contextToHeaders(session.changes()) };
      failure = checkResult(value);
    } catch (err) {
      failure = failureOf(err);
      refused = !failure.retryable;
    } finally {
      clearInterval(progress);
    }
    this.outcomes.record(failure === undefined || refused, performance.now() - started);
    this.finish(job, failure ? undefined : outcome, failure, log);
  }

  private finish(job: Job, outcome: Outcome | undefined, failure: Failure | undefined, log: Logger): void {
    const d = job.frame;
    const deliveries = [d, ...(this.inFlight.get(job.key) ?? [])];
    this.inFlight.delete(job.key);
    if (outcome && !failure) {
      this.dedupe.set(job.key, outcome);
      for (const x of deliveries) this.answer(x, outcome);
      log.debug({ attempt: d.attempt }, 'handled');
      return;
    }
    const f = failure!;
    // Only a final refusal is remembered: a retryable failure must run again when it is retried.
    if (!f.retryable) this.dedupe.set(job.key, { kind: 'rejected', code: f.code, reason: f.reason, retryable: false });
    for (const x of deliveries) this.reject(x, f.code, f.reason, f.retryable);
    log.warn({ attempt: d.attempt, code: f.code, retryable: f.retryable, err: f.reason }, 'delivery rejected');
  }

  /** The result (when one is expected) goes out before the ack, so the message is never DELIVERED without it. */
  private answer(d: DeliverFrame, outcome: Outcome): void {
    if (outcome.kind === 'rejected') {
      this.reject(d, outcome.code, outcome.reason, false);
      return;
    }
    if (expectsResult(d.message)) {
      const { binary, ...payload } = encodePayload(outcome.payload);
      const frame: Extract<AgentFrame, { type: 'result' }> = {
        type: 'result',
        message_id: d.message.message_id,
        seq: d.seq,
        status: 'ok',
        ...payload,
        ...traceOf(d),
      };
      if (binary) frame.content_type = 'application/octet-stream';
      if (Object.keys(outcome.headers).length > 0) frame.headers = outcome.headers;
      this.deps.send(frame);
    }
    this.ack(d);
  }
}
