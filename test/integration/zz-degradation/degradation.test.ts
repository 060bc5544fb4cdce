import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { ulid } from 'ulid';
import { startTestAgent, stopTestAgents, uniqueName } from '@reach/sdk/testing';
import { adminToken, uniq, urls } from '../../helpers/env.js';
import { TopicTap, plainKafka, registryClient } from '../../helpers/kafka.js';
import { registerProducer, type ProducerAgent } from '../ingress/producer-agent.js';

// SPEC R-D12, proven by fault injection against the real local stack: PostgreSQL stopped for
// 30 s. (Redis-blocked and Kafka-restart scenarios are not here yet: Redis refuses DEBUG SLEEP,
// and the broker restart exposed a service-kit fatal-path bug, now fixed, not yet re-verified.)
// These tests disturb servers every other test shares, so they live in this one file (the `zz-`
// folder runs after the others) and every disturbance is undone in a finally.
const OUTAGE_MS = 30_000;
const kafka = plainKafka();
const registry = registryClient();
const cap = (what: string) => uniqueName(`deg_${what}`).replace(/-/g, '_');
const auth = () => ({ authorization: `Bearer ${adminToken()}` });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Status {
  status: string;
  code?: number | null;
}
interface StatusEvent {
  message_id: string;
  state: string;
  at: number;
  service: string;
  code: number | null;
}

async function eventually<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(200);
  }
}

async function statusOf(id: string): Promise<Status | undefined> {
  const res = await fetch(`${urls.ingress}/v1/messages/${id}`, { headers: auth(), signal: AbortSignal.timeout(5_000) });
  return res.ok ? ((await res.json()) as Status) : undefined;
}

/** Every id ends DELIVERED (GET /v1/messages/{id}); fails with the states seen when one does not. */
async function allDelivered(ids: readonly string[], timeoutMs: number): Promise<void> {
  const seen = new Map<string, string>();
  try {
    await eventually(
      `${ids.length} messages DELIVERED`,
      async () => {
        const states = await Promise.all(ids.map(async (id) => [id, (await statusOf(id))?.status ?? 'unknown'] as const));
        for (const [id, s] of states) seen.set(id, s);
        return states.every(([, s]) => s === 'DELIVERED');
      },
      timeoutMs,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; last states: ${JSON.stringify(Object.fromEntries(seen))}`);
  }
}

let producer: Producer;
let producerAgent: ProducerAgent;
let envelopeSchemaId: number;
let statuses: TopicTap<StatusEvent>;

/** A reach.v1.Envelope written to reach.ingress.v1 the way an outside agent does (DESIGN §2). */
async function sendViaKafka(capability: string, n: number): Promise<string> {
  const messageId = `msg_${ulid()}`;
  const env = {
    message_id: messageId,
    message_type: 'task_request',
    capability,
    topic: null,
    target_agent_id: null,
    producer: producerAgent.agentId,
    trace_id: uniq('trace'),
    request_id: null,
    idempotency_key: null,
    session_id: null,
    correlation_id: null,
    reply_to: null,
    priority: 'NORMAL',
    tags: [],
    retryable: true,
    timeout_ms: null,
    created_at: Date.now(),
    expire_at: null,
    schema_version: 1,
    content_type: 'application/json',
    payload: Buffer.from(JSON.stringify({ n })),
    headers: {},
  };
  await producer.send({
    topic: 'reach.ingress.v1',
    acks: -1,
    messages: [{ key: messageId, value: await registry.encode(envelopeSchemaId, env), headers: { 'reach-token': producerAgent.token } }],
  });
  return messageId;
}

type HttpOutcome = { kind: 'accepted'; id: string; status: number } | { kind: 'refused'; status: number; code: unknown; body: string };

/** POST /v1/messages: accepted (202, with its id) or refused (the error body, which must carry a code). */
async function sendViaHttp(capability: string, n: number): Promise<HttpOutcome> {
  const res = await fetch(`${urls.ingress}/v1/messages`, {
    method: 'POST',
    headers: { ...auth(), 'content-type': 'application/json' },
    body: JSON.stringify({ capability, message_type: 'task_request', payload: { n } }),
    signal: AbortSignal.timeout(OUTAGE_MS + 30_000),
  });
  const text = await res.text();
  if (res.status === 202) return { kind: 'accepted', id: (JSON.parse(text) as { message_id: string }).message_id, status: res.status };
  let code: unknown;
  try {
    const body = JSON.parse(text) as { code?: unknown; error?: { code?: unknown } };
    code = body.error?.code ?? body.code;
  } catch {
    code = undefined;
  }
  return { kind: 'refused', status: res.status, code, body: text };
}

const pgCluster = () => readdirSync('/etc/postgresql').sort().at(-1)!;
function pgCtl(action: 'start' | 'stop'): void {
  execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', pgCluster(), 'main', action], { stdio: 'pipe', timeout: 60_000 });
}
function pgAnswers(): boolean {
  try {
    execFileSync('pg_isready', ['-h', '127.0.0.1', '-p', '5432'], { stdio: 'pipe', timeout: 5_000 });
    return true;
  } catch {
    return false;
  }
}

beforeAll(async () => {
  producerAgent = await registerProducer('degradation');
  envelopeSchemaId = await registry.getLatestSchemaId('reach.ingress.v1-value');
  producer = kafka.producer({ allowAutoTopicCreation: false, retry: { retries: 30, maxRetryTime: 3_000 } });
  await producer.connect();
  statuses = await new TopicTap<StatusEvent>(kafka, 'reach.status.v1').open();
}, 60_000);
afterEach(stopTestAgents);
afterAll(async () => {
  await Promise.allSettled([producer?.disconnect(), statuses?.close()]);
});

describe('degradation under dependency outages (SPEC R-D12)', () => {
  it('PostgreSQL stopped for 30 s: messages are still delivered, and the tracker catches up with every final state and timeline', async () => {
    const capability = cap('pg');
    const agent = await startTestAgent({ handlers: { [capability]: async (m) => ({ echo: m.message_id }) } });
    let stopped = false;
    try {
      pgCtl('stop');
      stopped = true;
      expect(pgAnswers()).toBe(false);
      const downAt = Date.now();
      const kafkaIds: string[] = [];
      for (let i = 0; i < 4; i++) kafkaIds.push(await sendViaKafka(capability, i));
      const http = await Promise.all([0, 1, 2, 3].map((i) => sendViaHttp(capability, 100 + i)));
      for (const o of http) if (o.kind === 'refused') expect({ status: o.status, code: o.code }).toEqual({ status: 503, code: 5002 });
      const ids = [...kafkaIds, ...http.flatMap((o) => (o.kind === 'accepted' ? [o.id] : []))];
      // Delivery does not need PostgreSQL: the agent gets every message while it is down.
      await eventually('the agent to receive every message', async () => ids.every((id) => agent.received.some((m) => m.message_id === id)), 20_000);
      for (const id of ids) await statuses.waitFor((r) => r.value?.message_id === id && r.value.state === 'DELIVERED', 20_000);
      await sleep(Math.max(0, OUTAGE_MS - (Date.now() - downAt)));
      pgCtl('start');
      stopped = false;

      await allDelivered(ids, 60_000);
      for (const id of ids) {
        const res = await fetch(`${urls.ingress}/v1/messages/${id}/events`, { headers: auth() });
        expect(res.status).toBe(200);
        const { events } = (await res.json()) as { events: Array<{ state: string }> };
        const states = events.map((e) => e.state);
        for (const s of ['PENDING', 'ROUTED', 'DELIVERING', 'DELIVERED']) expect(states, `${id} timeline`).toContain(s);
      }
    } finally {
      if (stopped || !pgAnswers()) pgCtl('start');
      await eventually('postgres answering', async () => pgAnswers(), 30_000);
    }
  }, 150_000);
});
