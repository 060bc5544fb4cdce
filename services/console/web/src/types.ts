/** The shapes the page reads: docs/design.md §3's public JSON and the console's own endpoints. */
import type { TimelineEvent } from './waterfall.js';

export interface Agent {
  agent_id: string;
  agent_type: string;
  status: string;
  revision: number;
  lease_expires_at: string;
  lease_valid: boolean;
  capabilities: Array<{ name: string; version: string | null; mode: string; tags: string[] }>;
  metadata: { max_concurrency: number; domain?: string | null; region?: string | null; model?: string | null };
  load: { current_load: number; queue_length: number; avg_latency_ms: number; health: number; load_rate: number };
  qos: number;
  /** `protocol_version` `a2a/…`: an A2A agent (docs/a2a.md). */
  endpoints?: { ws: string | null; http: string | null; protocol_version?: string };
  updated_at: string;
}

export interface ServiceHealth {
  service: string;
  url: string;
  state: 'ready' | 'starting' | 'down';
  detail?: string;
}

export interface StageRow {
  stage: string;
  topic: string;
  group: string;
  consumer: string;
  partitions: number;
  end_offset: number;
  committed_offset: number;
  lag: number;
  max_partition_lag: number;
  group_state: string;
  members: number;
  produced_per_s: number | null;
  consumed_per_s: number | null;
}

export interface Overview {
  at: string | null;
  refresh_ms: number;
  services: ServiceHealth[];
  pipeline: { at: string | null; stages: StageRow[]; error?: string };
}

export interface QosDelta {
  seq: number;
  agents: Record<string, Array<[number, number, number]>>;
}

export interface DeadLetter {
  dlq_id: string;
  message_id: string | null;
  status: string;
  reason: string;
  code: number;
  name: string | null;
  error: string | null;
  service: string;
  capability: string | null;
  topic: string | null;
  target_agent_id: string | null;
  message_type: string | null;
  producer: string | null;
  trace_id: string | null;
  attempts: number;
  replay_count: number;
  replayable: boolean;
  expire_at: string | null;
  created_at: string;
  updated_at: string;
  replayed_at: string | null;
  history?: unknown[];
  envelope?: Record<string, unknown> | null;
  [more: string]: unknown;
}

export interface ReplayResult {
  dlq_id: string;
  message_id: string | null;
  status: string;
  attempt: number;
  replay_count: number;
}

export interface Message {
  message_id: string;
  status: string;
  attempt: number;
  agent_id: string | null;
  code: number | null;
  name: string | null;
  reason: string | null;
  created_at: string;
  updated_at: string;
  trace_id: string;
  producer: string;
  message_type: string;
  capability: string | null;
  topic: string | null;
  target_agent_id: string | null;
  parent_message_id: string | null;
  result?: unknown;
}

export interface MessageEvents {
  message_id: string;
  events: TimelineEvent[];
}

export interface Trace {
  trace_id: string;
  messages: Array<Message & { events: TimelineEvent[] }>;
}
