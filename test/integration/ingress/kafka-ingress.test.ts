import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { ulid } from 'ulid';
import { plainKafka, registryClient, TopicTap } from '../../helpers/kafka.js';
import { uniq } from '../../helpers/env.js';

// The Kafka ingress contract (DESIGN §2) end to end through the real broker, the schema
// registry and the running ingress service: a plain kafkajs producer writes a framed
// reach.v1.Envelope to reach.ingress.v1; ingress validates it and forwards it to
// reach.pending.v1; bad records land in reach.dlq.v1 with their code, and the loop goes on.
const kafka = plainKafka();
const registry = registryClient();
let producer: Producer;
let pending: TopicTap<Record<string, unknown>>;
let dlq: TopicTap<Record<string, unknown>>;
let status: TopicTap<Record<string, unknown>>;
let envelopeId: number;

function envelope(overrides: Record<string, unknown> = {}) {
  return {
    message_id: `msg_${ulid()}`,
    message_type: 'task_request',
    capability: 'parse_pdf',
    topic: null,
    target_agent_id: null,
    producer: uniq('agent.test'),
    trace_id: uniq('trace'),
    request_id: null,
    idempotency_key: null,
    session_id: null,
    correlation_id: null,
    reply_to: null,
    priority: 'NORMAL',
    tags: ['it'],
    retryable: true,
    timeout_ms: null,
    created_at: Date.now(),
    expire_at: null,
    schema_version: 1,
    content_type: 'application/json',
    payload: Buffer.from(JSON.stringify({ doc: 'x.pdf' })),
    headers: {},
    ...overrides,
  };
}

beforeAll(async () => {
  envelopeId = await registry.getLatestSchemaId('reach.ingress.v1-value');
  producer = kafka.producer();
  await producer.connect();
  [pending, dlq, status] = await Promise.all([
    new TopicTap<Record<string, unknown>>(kafka, 'reach.pending.v1', registry).open(),
    new TopicTap<Record<string, unknown>>(kafka, 'reach.dlq.v1', registry).open(),
    new TopicTap<Record<string, unknown>>(kafka, 'reach.status.v1', registry).open(),
  ]);
});

afterAll(async () => {
  await Promise.all([pending?.close(), dlq?.close(), status?.close(), producer?.disconnect()]);
});

describe('Kafka ingress', () => {
  it('forwards a valid envelope from reach.ingress.v1 to reach.pending.v1, decoded, with PENDING status', async () => {
    const env = envelope();
    const value = await registry.encode(envelopeId, env);
    await producer.send({
      topic: 'reach.ingress.v1',
      acks: -1,
      messages: [{ key: env.message_id, value, headers: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' } }],
    });

    const got = await pending.waitFor((r) => r.value?.message_id === env.message_id);
    expect(got.value).toMatchObject({
      message_id: env.message_id,
      capability: 'parse_pdf',
      producer: env.producer,
      trace_id: env.trace_id,
      priority: 'NORMAL',
    });
    expect(Buffer.from(got.value!.payload as Buffer).toString()).toBe(JSON.stringify({ doc: 'x.pdf' }));
    expect(got.key).toBe(env.message_id);
    expect(got.headers.traceparent).toBe('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
    const st = await status.waitFor((r) => r.value?.message_id === env.message_id);
    expect(st.value).toMatchObject({ state: 'PENDING', service: 'ingress' });
  });

  it('keys a message with a session by its session_id', async () => {
    const env = envelope({ session_id: uniq('session') });
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [{ key: env.session_id as string, value: await registry.encode(envelopeId, env) }] });
    const got = await pending.waitFor((r) => r.value?.message_id === env.message_id);
    expect(got.key).toBe(env.session_id);
  });

  it('sends a garbage record to reach.dlq.v1 with code 4101, keeps its bytes, and keeps consuming', async () => {
    const marker = uniq('garbage');
    const garbage = Buffer.concat([Buffer.from([0x13, 0x37]), Buffer.from(marker)]);
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [{ key: marker, value: garbage }] });
    const dead = await dlq.waitFor((r) => r.value?.raw_key !== undefined && Buffer.from((r.value.raw_key as Buffer | null) ?? []).toString() === marker);
    expect(dead.value).toMatchObject({ reason: 'INVALID', code: 4101, source_topic: 'reach.ingress.v1', service: 'ingress' });
    expect(Buffer.from(dead.value!.raw_value as Buffer).equals(garbage)).toBe(true);

    // The loop is still alive: a valid record produced after the garbage goes through.
    const env = envelope();
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [{ key: env.message_id, value: await registry.encode(envelopeId, env) }] });
    await pending.waitFor((r) => r.value?.message_id === env.message_id);
  });

  it('rejects an envelope with two targets with 4101 and keeps the decoded envelope in the DLQ', async () => {
    const env = envelope({ topic: 'news' });
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [{ key: env.message_id, value: await registry.encode(envelopeId, env) }] });
    const dead = await dlq.waitFor(
      (r) => r.value?.message_id === env.message_id || (r.value?.envelope as { message_id?: string } | null)?.message_id === env.message_id,
    );
    expect(dead.value).toMatchObject({ reason: 'INVALID', code: 4101 });
    expect(String(dead.value!.error)).toMatch(/exactly one of capability, topic, target_agent_id/);
  });

  it('rejects an unknown schema id with 4103', async () => {
    const marker = uniq('unknown-id');
    const frame = Buffer.alloc(5 + 8);
    frame.writeUInt8(0, 0);
    frame.writeUInt32BE(987654, 1);
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [{ key: marker, value: frame }] });
    const dead = await dlq.waitFor((r) => Buffer.from((r.value?.raw_key as Buffer | null) ?? []).toString() === marker);
    expect(dead.value).toMatchObject({ reason: 'INVALID', code: 4103 });
  });

  it('rejects a payload over 256 KiB with 4102', async () => {
    const env = envelope({ payload: Buffer.alloc(256 * 1024 + 1, 1) });
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [{ key: env.message_id, value: await registry.encode(envelopeId, env) }] });
    const dead = await dlq.waitFor((r) => Buffer.from((r.value?.raw_key as Buffer | null) ?? []).toString() === env.message_id);
    expect(dead.value).toMatchObject({ reason: 'INVALID', code: 4102 });
  });
});
