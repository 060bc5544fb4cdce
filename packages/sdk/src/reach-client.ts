import { ReachError, IDEMPOTENCY_KEY_HEADER } from '@reach/core';
import { joinUrl, listOf, requestJson } from './http.js';
import { envelopeFields } from './payload.js';
import { RegistryClient, type AgentInfo, type AgentQuery } from './registry-client.js';
import type { ClientTls } from './tls.js';
import type { SendFields } from './types.js';

/**
 * A plain HTTP client of the public API (docs/design.md §3) for senders that are not agents, scripts
 * and the `reach` CLI: submit messages (optionally waiting for the handler's result), ask for
 * a message's status and timeline, a trace, and the registry's agents.
 */
export interface ReachClientOptions {
  ingressUrl: string;
  /** Needed only for `agents()`. */
  registryUrl?: string;
  /** An agent token (the producer of what is submitted) or the admin token. */
  token?: string;
  /** Per-request timeout; a waiting submit adds its wait. Default 10 s. */
  timeoutMs?: number;
  /** A private CA (and client certificate) for https URLs; see tls.ts. */
  tls?: ClientTls;
}

export interface SubmitOptions {
  /** Sent as the `Idempotency-Key` header (R-D5). */
  idempotencyKey?: string;
  /** Wait up to this long for the handler's result (`?wait_ms=`, R-C9). */
  waitMs?: number;
}

export interface SubmitResult {
  message_id: string;
  status: string;
  /** The handler's result `{status, payload}` when the submit waited and one arrived. */
  result?: unknown;
  /** 202 accepted, or 200 (a duplicate idempotency key, or a waited-for result). */
  http_status: number;
  [key: string]: unknown;
}

export interface MessageStatus {
  message_id: string;
  status: string;
  attempt?: number;
  agent_id?: string | null;
  code?: number | null;
  updated_at?: string;
  trace_id?: string;
  [key: string]: unknown;
}

export type TimelineEvent = Record<string, unknown>;

export class ReachClient {
  private readonly timeoutMs: number;
  private readonly registry: RegistryClient | undefined;

  constructor(private readonly options: ReachClientOptions) {
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.registry = options.registryUrl ? new RegistryClient(options.registryUrl, this.timeoutMs, options.tls) : undefined;
  }

  /** `POST /v1/messages`. A `?wait_ms` that runs out throws the body's code (504). */
  async submit(envelope: SendFields, options: SubmitOptions = {}): Promise<SubmitResult> {
    const qs = options.waitMs !== undefined ? `?wait_ms=${Math.max(0, Math.round(options.waitMs))}` : '';
    const headers: Record<string, string> = {};
    if (options.idempotencyKey) headers[IDEMPOTENCY_KEY_HEADER] = options.idempotencyKey;
    const res = await requestJson<Partial<SubmitResult>>(joinUrl(this.options.ingressUrl, `/v1/messages${qs}`), {
      method: 'POST',
      token: this.options.token,
      headers,
      body: envelopeFields(envelope),
      timeoutMs: this.timeoutMs + (options.waitMs ?? 0),
      tls: this.options.tls,
    });
    const body = res.body ?? {};
    if (typeof body.message_id !== 'string') throw new ReachError('INTERNAL', `ingress answered ${res.status} without a message_id`);
    return { ...body, message_id: body.message_id, status: typeof body.status === 'string' ? body.status : 'PENDING', http_status: res.status };
  }

  /** `GET /v1/messages/{id}`. */
  async status(messageId: string): Promise<MessageStatus> {
    const res = await requestJson<MessageStatus>(joinUrl(this.options.ingressUrl, `/v1/messages/${encodeURIComponent(messageId)}`), {
      token: this.options.token,
      timeoutMs: this.timeoutMs,
      tls: this.options.tls,
    });
    return res.body;
  }

  /** `GET /v1/messages/{id}/events`: the timeline, oldest first. */
  async events(messageId: string): Promise<TimelineEvent[]> {
    const res = await requestJson(joinUrl(this.options.ingressUrl, `/v1/messages/${encodeURIComponent(messageId)}/events`), {
      token: this.options.token,
      timeoutMs: this.timeoutMs,
      tls: this.options.tls,
    });
    return listOf<TimelineEvent>(res.body, 'events', 'timeline');
  }

  /** `GET /v1/traces/{trace_id}`, as the ingress answers it. */
  async trace(traceId: string): Promise<Record<string, unknown>> {
    const res = await requestJson<Record<string, unknown> | unknown[]>(joinUrl(this.options.ingressUrl, `/v1/traces/${encodeURIComponent(traceId)}`), {
      token: this.options.token,
      timeoutMs: this.timeoutMs,
      tls: this.options.tls,
    });
    return Array.isArray(res.body) ? { trace_id: traceId, messages: res.body } : res.body;
  }

  /** `GET /v1/agents?capability=&status=&domain=` on the registry. */
  async agents(query: AgentQuery = {}): Promise<AgentInfo[]> {
    if (!this.registry) throw new ReachError('INTERNAL', 'ReachClient needs registryUrl to list agents');
    return this.registry.list(query, this.options.token);
  }
}
