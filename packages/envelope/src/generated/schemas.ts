// Generated from schemas/*.avsc by scripts/gen-schema-types.mjs — do not edit.
// Timestamps (timestamp-millis) are epoch milliseconds.

export interface AgentLoad {
  current_load: number;
  queue_length: number;
  avg_latency_ms: number;
  health: number;
}

export interface AgentMetadata {
  max_concurrency: number;
  region: null | string;
  timezone: null | string;
  model: null | string;
  domain: string;
  weight: number;
  extra: Record<string, string>;
}

/** The registry's view of one agent, on the compacted reach.agents.v1 (key = agent_id, tombstone on deregistration). Every router and dispatcher folds it into a local view. */
export interface AgentRecord {
  agent_id: string;
  agent_type: string;
  status: AgentStatus;
  /** increases with every change; older revisions are ignored */
  revision: number;
  lease_id: string;
  lease_expires_at: number;
  ttl_s: number;
  endpoints: Endpoints;
  capabilities: Array<Capability>;
  metadata: AgentMetadata;
  load: AgentLoad;
  qos: number;
  registered_at: number;
  updated_at: number;
}

export type AgentStatus = 'ONLINE' | 'COOLDOWN' | 'OFFLINE';
export const AgentStatusValues = ['ONLINE', 'COOLDOWN', 'OFFLINE'] as const;

/** An operator-facing alert event on reach.alerts.v1 (e.g. a ReachRule fallback notify_admin, DLQ entries swept to DEAD). Also logged at error level by the emitting service. */
export interface Alert {
  alert_id: string;
  /** NO_AVAILABLE_AGENT, DLQ_SWEPT_DEAD, … */
  kind: string;
  /** P1 (page), P2 (ticket), P3 (info) */
  severity: string;
  service: string;
  /** one human sentence: what happened and what to do */
  summary: string;
  message_id: null | string;
  trace_id: null | string;
  capability: null | string;
  rule: null | string;
  labels: Record<string, string>;
  at: number;
}

export interface Capability {
  name: string;
  version: null | string;
  mode: CapabilityMode;
  tags: Array<string>;
  consumption: Consumption;
  scope_json: null | string;
  constraints_json: null | string;
}

export type CapabilityMode = 'handle' | 'subscribe';
export const CapabilityModeValues = ['handle', 'subscribe'] as const;

export type Consumption = 'single' | 'aggregate' | 'stream' | 'batch';
export const ConsumptionValues = ['single', 'aggregate', 'stream', 'batch'] as const;

/** A message (or an undecodable record) that could not be delivered, on reach.dlq.v1. The dead-letter service stores it; admins inspect and replay it. */
export interface DeadLetter {
  dlq_id: string;
  message_id: null | string;
  reason: DeadLetterReason;
  code: number;
  error: string;
  at: number;
  service: string;
  source_topic: string;
  source_partition: number;
  source_offset: number;
  attempts: number;
  producer: null | string;
  trace_id: null | string;
  /** the attempts so far: agent, code, reason, time */
  history_json: null | string;
  envelope: null | Envelope;
  /** the original record when it could not be decoded */
  raw_key: null | Buffer;
  raw_value: null | Buffer;
  raw_headers: Record<string, string>;
}

export type DeadLetterReason = 'NO_ROUTE' | 'RETRIES_EXHAUSTED' | 'BUDGET_EXCEEDED' | 'INVALID' | 'EXPIRED' | 'REJECTED' | 'RATE_LIMITED' | 'UNPROCESSABLE';
export const DeadLetterReasonValues = ['NO_ROUTE', 'RETRIES_EXHAUSTED', 'BUDGET_EXCEEDED', 'INVALID', 'EXPIRED', 'REJECTED', 'RATE_LIMITED', 'UNPROCESSABLE'] as const;

export interface Endpoints {
  ws: null | string;
  http: null | string;
  protocol_version: string;
}

/** The message every producer sends (DESIGN §2, public contract). Exactly one of capability, topic, target_agent_id is set. The payload is opaque: Agent-Reach never parses it. */
export interface Envelope {
  /** msg_ + ULID */
  message_id: string;
  /** task_request, task_result, event, health_check, ... */
  message_type: string;
  capability: null | string;
  topic: null | string;
  target_agent_id: null | string;
  /** agent id of the sender; must be the agent of the reach-token */
  producer: string;
  trace_id: string;
  request_id: null | string;
  idempotency_key: null | string;
  session_id: null | string;
  correlation_id: null | string;
  reply_to: null | string;
  priority: Priority;
  tags: Array<string>;
  retryable: boolean;
  timeout_ms: null | number;
  created_at: number;
  expire_at: null | number;
  /** version of the payload's own schema */
  schema_version: number;
  content_type: string;
  /** opaque, at most 256 KiB */
  payload: Buffer;
  headers: Record<string, string>;
}

/** A cross-domain delivery grant (SPEC R-A8) on the compacted reach.grants.v1, key = grant_id (from_domain|to_domain|capability or *). Written by the registry after PostgreSQL; a tombstone revokes it. Routers keep a local view. */
export interface Grant {
  grant_id: string;
  from_domain: string;
  to_domain: string;
  /** name@major; null = every capability */
  capability: null | string;
  created_by: null | string;
  created_at: number;
}

export type MessageState = 'PENDING' | 'ROUTED' | 'DELIVERING' | 'DELIVERED' | 'REJECTED' | 'DEAD';
export const MessageStateValues = ['PENDING', 'ROUTED', 'DELIVERING', 'DELIVERED', 'REJECTED', 'DEAD'] as const;

/** Where an agent is connected, on the compacted reach.presence.v1 (key = agent_id). A dispatcher instance that holds the agent's socket publishes it; others forward to it. */
export interface Presence {
  agent_id: string;
  connected: boolean;
  dispatcher_instance: null | string;
  connection_id: null | string;
  at: number;
}

export type Priority = 'HIGH' | 'NORMAL' | 'LOW';
export const PriorityValues = ['HIGH', 'NORMAL', 'LOW'] as const;

/** A failed attempt waiting for its backoff, on reach.retry.v1. The retry-scheduler re-publishes it to reach.pending.v1 at not_before. */
export interface RetryRequest {
  message_id: string;
  /** the attempt that failed */
  attempt: number;
  not_before: number;
  code: number;
  reason: string;
  failed_agent_id: null | string;
  exclude_agent_ids: Array<string>;
  first_attempt_at: number;
  envelope: Envelope;
}

/** The router's decision for one attempt of one message (or one copy of a fan-out), on reach.routed.v1 keyed by agent_id so every delivery to an agent stays in order. */
export interface RoutedDelivery {
  /** id of the delivered message (a fan-out copy has its own id) */
  message_id: string;
  parent_message_id: null | string;
  agent_id: string;
  attempt: number;
  routed_at: number;
  /** ack deadline of this attempt */
  deadline_at: number;
  /** end of the whole message's time budget */
  budget_deadline_at: null | number;
  rule: null | string;
  envelope: Envelope;
}

/** Status events of one produce request of a stage, packed into one record of reach.status-batches.v1 (key = the first event's message_id). The tracker folds them like single events: the fold does not depend on how events were split into records or in what order they came. */
export interface StatusBatch {
  events: Array<StatusEvent>;
}

/** One step of a message's life. Stages produce them packed in StatusBatch records (reach.status-batches.v1); reach.status.v1 carries single events (key = message_id) and is read too. The tracker folds them into the read model. States only move forward. */
export interface StatusEvent {
  event_id: string;
  message_id: string;
  state: MessageState;
  attempt: number;
  at: number;
  /** ingress, router, dispatcher, ... */
  service: string;
  instance: string;
  trace_id: null | string;
  producer: null | string;
  message_type: null | string;
  capability: null | string;
  topic: null | string;
  target_agent_id: null | string;
  /** the agent chosen / delivered to */
  agent_id: null | string;
  /** set on each tracked copy of a subscribe fan-out */
  parent_message_id: null | string;
  code: null | number;
  reason: null | string;
  /** stage detail for the timeline: routing candidates, scores, rule, choice */
  detail_json: null | string;
  created_at: null | number;
  expire_at: null | number;
  idempotency_key: null | string;
  session_id: null | string;
  correlation_id: null | string;
  request_id: null | string;
  reply_to: null | string;
  priority: null | string;
}
