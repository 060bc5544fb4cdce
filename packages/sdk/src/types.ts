/**
 * The public shapes the SDK speaks: the agent descriptor of R-A1 (sent to
 * `POST /v1/agents`), the envelope in its JSON form (docs/design.md §2/§3, snake_case Avro names) as
 * handlers receive it, and the fields a sender may set.
 */

export type CapabilityMode = 'handle' | 'subscribe';
export type Consumption = 'single' | 'aggregate' | 'stream' | 'batch';
export type Priority = 'HIGH' | 'NORMAL' | 'LOW';

/** One capability an agent offers (R-A1). A bare string means `{ name, mode: 'handle' }`. */
export interface CapabilitySpec {
  /** Exact tag, `verb_object` or `verb:object` (e.g. `parse_pdf`, `query:orders`). */
  name: string;
  mode?: CapabilityMode;
  version?: string;
  tags?: string[];
  consumption?: Consumption;
  /** Data sources, access level, acceptable timeout range. */
  scope?: Record<string, unknown>;
  constraints?: Record<string, unknown>;
  /** What the capability does, and example inputs: the skill's description and examples on the A2A Agent Card (kept in `scope`). */
  description?: string;
  examples?: string[];
}

export interface AgentMetadata {
  /** How many deliveries run at once; more wait in the node's local queue. Default 10. */
  max_concurrency?: number;
  region?: string;
  timezone?: string;
  model?: string;
  /** Security domain (R-A8). */
  domain?: string;
  weight?: number;
  extra?: Record<string, string>;
  [key: string]: unknown;
}

/** The capability descriptor an agent registers with (R-A1). */
export interface AgentDescriptor {
  /** Globally unique id; omitted = the registry assigns one. Kept across token refreshes. */
  agent_id?: string;
  agent_type: string;
  /** Declared capabilities; `handle()`/`subscribe()` add theirs when missing. */
  capabilities?: Array<string | CapabilitySpec>;
  metadata?: AgentMetadata;
  /** Lease TTL in seconds (registry default 60); heartbeats are due every TTL/2. */
  ttl_s?: number;
  /** `a2a`: the JSON-RPC URL of an A2A agent (docs/a2a.md), instead of `http`. */
  endpoints?: { ws?: string; http?: string; a2a?: string; protocol_version?: string };
}

/** The registry's answer to `POST /v1/agents` (docs/design.md §3). */
export interface Registration {
  agent_id: string;
  lease_id: string;
  token: string;
  ttl_s: number;
  heartbeat_interval_ms: number;
  /** Descriptor advice that did not block registration (vague names, too many capabilities, …). */
  warnings?: Array<{ field?: string; message: string }>;
}

/** What a heartbeat reports (R-A5). */
export interface LoadReport {
  /** Handlers running right now. */
  current_load: number;
  /** Deliveries waiting in the node's local queue. */
  queue_length: number;
  avg_latency_ms: number;
  /** Recent (5 min) success ratio, 0…1. */
  health: number;
}

/**
 * An envelope in its JSON form, as delivered (`deliver.message`) and as the HTTP API shows it.
 * `payload` is the parsed JSON when `content_type` is JSON, else the bytes are in `payload_b64`.
 */
export interface ReachMessage<P = unknown> {
  message_id: string;
  message_type: string;
  capability: string | null;
  topic: string | null;
  target_agent_id: string | null;
  producer: string;
  trace_id: string;
  request_id: string | null;
  idempotency_key: string | null;
  session_id: string | null;
  correlation_id: string | null;
  reply_to: string | null;
  priority: Priority;
  tags: string[];
  retryable: boolean;
  timeout_ms: number | null;
  created_at: string;
  expire_at: string | null;
  schema_version: number;
  content_type: string;
  payload?: P;
  payload_b64?: string;
  headers: Record<string, string>;
}

/**
 * What a sender sets (everything else is filled in): exactly one of capability, topic,
 * target_agent_id. `payload` is any JSON value; a Buffer/Uint8Array is sent as `payload_b64`.
 */
export interface SendFields {
  capability?: string;
  topic?: string;
  target_agent_id?: string;
  message_type?: string;
  payload?: unknown;
  payload_b64?: string;
  message_id?: string;
  trace_id?: string;
  /** W3C trace context the message continues (the `send` frame carries it; the dispatcher puts it on the Kafka record). */
  traceparent?: string;
  request_id?: string;
  idempotency_key?: string;
  session_id?: string;
  correlation_id?: string;
  reply_to?: string;
  priority?: Priority;
  tags?: string[];
  retryable?: boolean;
  timeout_ms?: number;
  /** Defaults to now; RFC 3339 or epoch milliseconds. */
  created_at?: string | number;
  expire_at?: string | number;
  schema_version?: number;
  content_type?: string;
  headers?: Record<string, string>;
}

/** The body of a `reach.receipt` message: why a message this agent sent was rejected or died. */
export interface Receipt {
  message_id: string;
  status: string;
  code: number;
  name: string;
  reason: string;
}
