import { Agent, request } from 'undici';
import { A2A_PROTOCOL_VERSION } from '@reach/a2a';
import { A2A_VERSION_HEADER, PUSH_AGENT_ID_HEADER, PUSH_SEQ_HEADER, TRACEPARENT_HEADER, type Logger } from '@reach/core';
import { a2aExchange } from './a2a-push.js';
import type { DispatcherMetrics } from './metrics.js';

/**
 * HTTP push (R-C8) for agents that expose an `http` endpoint and hold no WebSocket: the
 * `deliver` frame is POSTed as JSON over a keep-alive pool, with an explicit timeout.
 *
 *   2xx          → ack (DELIVERED); a JSON body `{"result": {status, payload}}` is a result too
 *   4xx          → reject (REJECTED 3003; the body's error code/message or reason are kept)
 *   5xx, timeout → failure: the delivery stays DELIVERING in the replay buffer
 *
 * Pushes never run on the consumer's critical path: `push` only queues. At most `maxInFlight`
 * requests run at once; beyond `maxQueued` waiting, a push is dropped (it stays buffered and
 * DELIVERING, like a failure) rather than growing memory without bound.
 */
export interface PushJob {
  agent: string;
  endpoint: string;
  seq: number;
  messageId: string;
  traceId: string | undefined;
  /** The delivery's W3C trace context, sent as the `traceparent` HTTP header (R-F1). */
  traceparent?: string | undefined;
  /** The deliver frame text. */
  frame: string;
  /** The delivery as buffered (head and frame), for its DELIVERING event (onSent). */
  entry?: string | undefined;
  /** `a2a`: the agent speaks A2A 1.0 JSON-RPC at `endpoint` (a2a-push.ts); else the frame is POSTed as is. */
  protocol?: 'http' | 'a2a';
  /** For A2A: the skill id the agent's card names for the message's capability. */
  skill?: string | undefined;
}

export interface PushResult {
  status: 'ok' | 'error';
  payload: unknown;
  payload_b64?: string;
  content_type?: string;
}

export type PushOutcome =
  /** `a2aTaskId`: the A2A agent's own task id (a2a-push.ts), kept in the DELIVERED detail. */
  | { kind: 'ack'; result?: PushResult; a2aTaskId?: string | undefined }
  | { kind: 'reject'; code: number | string | undefined; reason: string }
  | { kind: 'failure'; reason: string };

/** Largest response body read from an agent; the rest is discarded. */
const MAX_RESPONSE_BYTES = 1024 * 1024;

function parseJson(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function obj(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** What an agent's HTTP answer means (pure). */
export function classifyPushResponse(statusCode: number, bodyText: string): PushOutcome {
  const body = obj(parseJson(bodyText));
  if (statusCode >= 200 && statusCode < 300) {
    const r = obj(body?.result);
    if (!r) return { kind: 'ack' };
    const result: PushResult = { status: r.status === 'error' ? 'error' : 'ok', payload: r.payload ?? null };
    if (typeof r.payload_b64 === 'string') result.payload_b64 = r.payload_b64;
    if (typeof r.content_type === 'string') result.content_type = r.content_type;
    return { kind: 'ack', result };
  }
  if (statusCode >= 400 && statusCode < 500) {
    const err = obj(body?.error);
    const code = (err?.code ?? body?.code ?? statusCode) as number | string;
    const reason = [err?.message, body?.reason, body?.message].find((x): x is string => typeof x === 'string') ?? `HTTP ${statusCode}`;
    return { kind: 'reject', code: typeof code === 'number' || typeof code === 'string' ? code : statusCode, reason };
  }
  return { kind: 'failure', reason: `HTTP ${statusCode}` };
}

export interface HttpPusherOptions {
  timeoutMs: number;
  idleMs: number;
  maxInFlight?: number;
  maxQueued?: number;
  log: Logger;
  metrics: DispatcherMetrics;
  onOutcome: (job: PushJob, outcome: PushOutcome) => Promise<void>;
  /** A push is being made (its request goes out now): its DELIVERING event is due (sent-ledger.ts). */
  onSent?: (job: PushJob) => void;
  /** An A2A agent still works on the task: extend the delivery's ack deadline; false when it is no longer pending. */
  onProgress?: (job: PushJob) => Promise<boolean>;
}

export class HttpPusher {
  private readonly pool: Agent;
  private readonly queue: PushJob[] = [];
  private inFlight = 0;
  private readonly running = new Set<Promise<void>>();
  private readonly maxInFlight: number;
  private readonly maxQueued: number;
  private closing = false;
  /** Wakes the sleeping A2A polls when the pusher closes. */
  private readonly wakers = new Set<() => void>();

  constructor(private readonly opts: HttpPusherOptions) {
    this.maxInFlight = opts.maxInFlight ?? 64;
    this.maxQueued = opts.maxQueued ?? 10_000;
    this.pool = new Agent({
      keepAliveTimeout: opts.idleMs,
      keepAliveMaxTimeout: opts.idleMs,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
      connect: { timeout: opts.timeoutMs },
    });
  }

  push(job: PushJob): void {
    if (this.inFlight < this.maxInFlight) this.start(job);
    else if (this.queue.length < this.maxQueued) this.queue.push(job);
    else {
      this.opts.metrics.httpPushes.inc({ outcome: 'dropped' });
      this.opts.log.warn({ agent_id: job.agent, message_id: job.messageId, trace_id: job.traceId }, 'http push queue full; the delivery stays buffered');
    }
  }

  private start(job: PushJob): void {
    this.inFlight++;
    const p = this.run(job).finally(() => {
      this.inFlight--;
      this.running.delete(p);
      const next = this.queue.shift();
      if (next) this.start(next);
    });
    this.running.add(p);
  }

  /** POSTs a body and reads the answer (at most MAX_RESPONSE_BYTES), within the push timeout. */
  private async post(job: PushJob, body: string, headers: Record<string, string>): Promise<{ status: number; text: string }> {
    const res = await request(job.endpoint, {
      method: 'POST',
      dispatcher: this.pool,
      body,
      headers: { 'content-type': 'application/json', ...headers, ...(job.traceparent ? { [TRACEPARENT_HEADER]: job.traceparent } : {}) },
      signal: AbortSignal.timeout(this.opts.timeoutMs),
    });
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      if (size > MAX_RESPONSE_BYTES) break;
      chunks.push(chunk as Buffer);
    }
    if (size > MAX_RESPONSE_BYTES) res.body.destroy();
    return { status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') };
  }

  /** An A2A agent: SendMessage, then GetTask polls while it works (a2a-push.ts). */
  private a2a(job: PushJob): Promise<PushOutcome> {
    return a2aExchange(job.frame, job.skill, {
      post: (body) => this.post(job, JSON.stringify(body), { accept: 'application/json', [A2A_VERSION_HEADER]: A2A_PROTOCOL_VERSION }),
      progress: () => this.opts.onProgress?.(job) ?? Promise.resolve(false),
      sleep: (ms) =>
        new Promise<void>((resolve) => {
          const wake = () => {
            clearTimeout(timer);
            this.wakers.delete(wake);
            resolve();
          };
          const timer = setTimeout(wake, ms);
          this.wakers.add(wake);
        }),
      closing: () => this.closing,
    });
  }

  private async run(job: PushJob): Promise<void> {
    let outcome: PushOutcome;
    this.opts.onSent?.(job);
    try {
      if (job.protocol === 'a2a') outcome = await this.a2a(job);
      else outcome = await this.http(job);
    } catch (err) {
      outcome = { kind: 'failure', reason: (err as Error).name === 'TimeoutError' ? `timed out after ${this.opts.timeoutMs} ms` : (err as Error).message };
    }
    await this.settle(job, outcome);
  }

  private async http(job: PushJob): Promise<PushOutcome> {
    const { status, text } = await this.post(job, job.frame, { [PUSH_AGENT_ID_HEADER]: job.agent, [PUSH_SEQ_HEADER]: String(job.seq) });
    return classifyPushResponse(status, text);
  }

  private async settle(job: PushJob, outcome: PushOutcome): Promise<void> {
    this.opts.metrics.httpPushes.inc({ outcome: outcome.kind });
    const fields = { agent_id: job.agent, message_id: job.messageId, trace_id: job.traceId, seq: job.seq };
    if (outcome.kind === 'failure')
      this.opts.log.warn({ ...fields, reason: outcome.reason }, `${job.protocol === 'a2a' ? 'a2a' : 'http'} push failed; the delivery stays buffered`);
    try {
      await this.opts.onOutcome(job, outcome);
    } catch (err) {
      this.opts.log.error({ ...fields, err }, 'could not record the http push outcome');
    }
  }

  /** Waits for the pushes in flight (queued ones stay buffered for replay) and closes the pool. */
  async close(): Promise<void> {
    this.queue.length = 0;
    // A2A polls stop at once: their deliveries stay buffered and come back with their deadlines.
    this.closing = true;
    for (const wake of this.wakers) wake();
    this.wakers.clear();
    await Promise.allSettled([...this.running]);
    await this.pool.close();
  }
}
