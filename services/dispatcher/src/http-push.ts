import { Agent, request } from 'undici';
import type { Logger } from '@reach/core';
import type { DispatcherMetrics } from './metrics.js';

/**
 * HTTP push (SPEC R-C8) for agents that expose an `http` endpoint and hold no WebSocket: the
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
  /** The delivery's W3C trace context, sent as the `traceparent` HTTP header (SPEC R-F1). */
  traceparent?: string | undefined;
  /** The deliver frame text. */
  frame: string;
}

export interface PushResult {
  status: 'ok' | 'error';
  payload: unknown;
  payload_b64?: string;
  content_type?: string;
}

export type PushOutcome =
  | { kind: 'ack'; result?: PushResult }
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
}

export class HttpPusher {
  private readonly pool: Agent;
  private readonly queue: PushJob[] = [];
  private inFlight = 0;
  private readonly running = new Set<Promise<void>>();
  private readonly maxInFlight: number;
  private readonly maxQueued: number;

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

  private async run(job: PushJob): Promise<void> {
    let outcome: PushOutcome;
    try {
      const res = await request(job.endpoint, {
        method: 'POST',
        dispatcher: this.pool,
        body: job.frame,
        headers: {
          'content-type': 'application/json',
          'reach-agent-id': job.agent,
          'reach-seq': String(job.seq),
          ...(job.traceparent ? { traceparent: job.traceparent } : {}),
        },
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
      outcome = classifyPushResponse(res.statusCode, Buffer.concat(chunks).toString('utf8'));
    } catch (err) {
      outcome = { kind: 'failure', reason: (err as Error).name === 'TimeoutError' ? `timed out after ${this.opts.timeoutMs} ms` : (err as Error).message };
    }
    this.opts.metrics.httpPushes.inc({ outcome: outcome.kind });
    const fields = { agent_id: job.agent, message_id: job.messageId, trace_id: job.traceId, seq: job.seq };
    if (outcome.kind === 'failure') this.opts.log.warn({ ...fields, reason: outcome.reason }, 'http push failed; the delivery stays buffered');
    try {
      await this.opts.onOutcome(job, outcome);
    } catch (err) {
      this.opts.log.error({ ...fields, err }, 'could not record the http push outcome');
    }
  }

  /** Waits for the pushes in flight (queued ones stay buffered for replay) and closes the pool. */
  async close(): Promise<void> {
    this.queue.length = 0;
    await Promise.allSettled([...this.running]);
    await this.pool.close();
  }
}
