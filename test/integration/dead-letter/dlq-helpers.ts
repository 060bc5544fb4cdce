import { newId } from '@reach/core';
import type { Producer } from 'kafkajs';
import { uniqueName } from '@reach/sdk/testing';
import { adminToken, urls } from '../../helpers/env.js';
import { registryClient } from '../../helpers/kafka.js';
import { eventually as waitEventually } from '../../helpers/wait.js';
import { testEnvelope } from '../../helpers/envelope.js';

/** Helpers of the dead-letter tests: the admin API, polling, and records an outside client would produce. */
export interface Entry {
  dlq_id: string;
  message_id: string | null;
  status: string;
  reason: string;
  code: number;
  capability: string | null;
  attempts: number;
  replay_count: number;
  replayable: boolean;
  history?: Array<Record<string, unknown>>;
  envelope?: Record<string, unknown> | null;
  raw_b64?: string | null;
  source?: { topic: string | null; partition: number | null; offset: string | null };
}

export async function api<T = unknown>(
  method: string,
  path: string,
  body?: unknown,
  token: string | null = adminToken(),
): Promise<{ status: number; body: T }> {
  const res = await fetch(`${urls.deadLetter}${path}`, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
}

/** The shared poller with this folder's patience (dead letters pass through three services). */
export function eventually<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  return waitEventually(what, probe, timeoutMs, 150);
}

export async function entry(id: string): Promise<Entry | undefined> {
  const r = await api<Entry>('GET', `/v1/dlq/${id}`);
  return r.status === 200 ? r.body : undefined;
}

/** The entries of a capability (newest first). */
export async function entriesOf(capability: string, reason?: string): Promise<Entry[]> {
  const q = new URLSearchParams({ capability, ...(reason ? { reason } : {}), limit: '100' });
  const r = await api<{ entries: Entry[] }>('GET', `/v1/dlq?${q}`);
  return r.status === 200 ? r.body.entries : [];
}

export interface MessageState {
  message_id: string;
  status: string;
  attempt: number;
  agent_id?: string | null;
}

export async function message(id: string): Promise<MessageState | undefined> {
  const res = await fetch(`${urls.ingress}/v1/messages/${id}`, { headers: { authorization: `Bearer ${adminToken()}` } });
  return res.ok ? ((await res.json()) as MessageState) : undefined;
}

export const cap = (what: string) => uniqueName(`dlq_${what}`).replace(/-/g, '_');

/** An envelope in its Avro form (as a plain kafkajs producer builds it), sent by the admin. */
export function envelope(capability: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return testEnvelope({ capability, trace_id: uniqueName('trace').replace(/-/g, ''), ...extra });
}

/** Sends an envelope to reach.ingress.v1 with the admin token (docs/design.md §2). */
export async function sendToIngress(producer: Producer, env: Record<string, unknown>): Promise<void> {
  const registry = registryClient();
  const value = await registry.encode(await registry.getLatestSchemaId('reach.ingress.v1-value'), env);
  await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [{ key: String(env.message_id), value, headers: { 'reach-token': adminToken() } }] });
}

/**
 * Produces a DeadLetter record to reach.dlq.v1 the way a pipeline stage does (e.g. the
 * dispatcher/retry-scheduler giving up on a REJECTED message). Returns its dlq_id.
 */
export async function sendDeadLetter(
  producer: Producer,
  env: Record<string, unknown>,
  reason: string,
  code: number,
  attempts = 0,
  dlqId: string = newId('dlq'),
  source: { partition: number; offset: number } = { partition: -1, offset: -1 },
): Promise<string> {
  const registry = registryClient();
  const value = await registry.encode(await registry.getLatestSchemaId('reach.dlq.v1-value'), {
    dlq_id: dlqId,
    message_id: env.message_id,
    reason,
    code,
    error: `test: ${reason}`,
    at: Date.now(),
    service: 'test',
    source_topic: 'reach.routed.v1',
    source_partition: source.partition,
    source_offset: source.offset,
    attempts,
    producer: env.producer,
    trace_id: env.trace_id,
    history_json: JSON.stringify([{ attempt: attempts, code, reason }]),
    envelope: env,
    raw_key: null,
    raw_value: null,
    raw_headers: {},
  });
  await producer.send({ topic: 'reach.dlq.v1', acks: -1, messages: [{ key: String(env.message_id), value }] });
  return dlqId;
}
