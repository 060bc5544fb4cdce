import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { ulid } from 'ulid';
import { plainKafka, registryClient, TopicTap, statusTap } from '../../helpers/kafka.js';
import { adminToken, uniq } from '../../helpers/env.js';
import { mintToken, registerProducer, type ProducerAgent } from './producer-agent.js';

// The Kafka ingress contract (docs/design.md §2) end to end through the real broker, the schema
// registry and the running ingress service: a registered agent writes a framed
// reach.v1.Envelope to reach.ingress.v1 with its token in the `reach-token` header; ingress
// checks the token and the producer, validates the envelope and forwards it to
// reach.pending.v1; bad records land in reach.dlq.v1 with their code, and the loop goes on.
const kafka = plainKafka();
const registry = registryClient();
let producer: Producer;
let pending: TopicTap<Record<string, unknown>>;
let dlq: TopicTap<Record<string, unknown>>;
let status: TopicTap<Record<string, unknown>>;
let envelopeId: number;
let agent: ProducerAgent;

function envelope(overrides: Record<string, unknown> = {}) {
  return {
    message_id: `msg_${ulid()}`,
    message_type: 'task_request',
    capability: 'parse_pdf',
    topic: null,
    target_agent_id: null,
    producer: agent.agentId,
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

/** The record an agent sends: key session_id ?? message_id, its token in `reach-token`. */
async function record(env: ReturnType<typeof envelope>, headers: Record<string, string> = { 'reach-token': agent.token }) {
  return { key: (env.session_id as string | null) ?? env.message_id, value: await registry.encode(envelopeId, env), headers };
}

const byMessage = (id: string) => (r: { value?: Record<string, unknown> | undefined }) =>
  r.value?.message_id === id || (r.value?.envelope as { message_id?: string } | null | undefined)?.message_id === id;

beforeAll(async () => {
  agent = await registerProducer('kafka-producer');
  envelopeId = await registry.getLatestSchemaId('reach.ingress.v1-value');
  producer = kafka.producer();
  await producer.connect();
  [pending, dlq, status] = await Promise.all([
    new TopicTap<Record<string, unknown>>(kafka, 'reach.pending.v1', registry).open(),
    new TopicTap<Record<string, unknown>>(kafka, 'reach.dlq.v1', registry).open(),
    statusTap<Record<string, unknown>>(kafka, registry).open(),
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
      messages: [
        { key: env.message_id, value, headers: { 'reach-token': agent.token, traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' } },
      ],
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
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [await record(env)] });
    const got = await pending.waitFor((r) => r.value?.message_id === env.message_id);
    expect(got.key).toBe(env.session_id);
  });

  it('sends a garbage record to reach.dlq.v1 with code 4101, keeps its bytes, and keeps consuming', async () => {
    const marker = uniq('garbage');
    const garbage = Buffer.concat([Buffer.from([0x13, 0x37]), Buffer.from(marker)]);
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [{ key: marker, value: garbage, headers: { 'reach-token': agent.token, marker } }] });
    const dead = await dlq.waitFor((r) => r.value?.raw_key !== undefined && Buffer.from((r.value.raw_key as Buffer | null) ?? []).toString() === marker);
    expect(dead.value).toMatchObject({ reason: 'INVALID', code: 4101, source_topic: 'reach.ingress.v1', service: 'ingress' });
    expect(Buffer.from(dead.value!.raw_value as Buffer).equals(garbage)).toBe(true);
    // The other headers are kept for inspection; the agent's token never lands in the DLQ.
    expect(dead.value!.raw_headers).toMatchObject({ marker });
    expect(dead.value!.raw_headers).not.toHaveProperty('reach-token');

    // The loop is still alive: a valid record produced after the garbage goes through.
    const env = envelope();
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [await record(env)] });
    await pending.waitFor((r) => r.value?.message_id === env.message_id);
  });

  it('rejects an envelope with two targets with 4101 and keeps the decoded envelope in the DLQ', async () => {
    const env = envelope({ topic: 'news' });
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [await record(env)] });
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
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [await record(env)] });
    const dead = await dlq.waitFor((r) => Buffer.from((r.value?.raw_key as Buffer | null) ?? []).toString() === env.message_id);
    expect(dead.value).toMatchObject({ reason: 'INVALID', code: 4102 });
  });

  it('refuses a record without a reach-token with 1003 in the DLQ and tells the named producer by receipt', async () => {
    const env = envelope();
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [await record(env, {})] });
    const dead = await dlq.waitFor(byMessage(env.message_id));
    expect(dead.value).toMatchObject({ reason: 'INVALID', code: 1003, service: 'ingress', source_topic: 'reach.ingress.v1' });
    expect(String(dead.value!.error)).toMatch(/missing token/);
    const receipt = await pending.waitFor((r) => r.value?.message_type === 'reach.receipt' && r.value.correlation_id === env.message_id);
    expect(receipt.value).toMatchObject({ target_agent_id: agent.agentId, producer: 'reach' });
    expect(JSON.parse(Buffer.from(receipt.value!.payload as Buffer).toString())).toMatchObject({ message_id: env.message_id, code: 1003, name: 'AUTH_FAILED' });
    // Nobody proved who sent it: the read model is not touched for an unauthenticated record.
    expect(status.records.some(byMessage(env.message_id))).toBe(false);
    expect(pending.records.some((r) => r.value?.message_id === env.message_id)).toBe(false);
  });

  it('refuses a forged token with 1003', async () => {
    const env = envelope();
    const forged = `${agent.token.slice(0, -4)}AAAA`;
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [await record(env, { 'reach-token': forged })] });
    const dead = await dlq.waitFor(byMessage(env.message_id));
    expect(dead.value).toMatchObject({ reason: 'INVALID', code: 1003 });
    expect(String(dead.value!.error)).toMatch(/signature/);
  });

  it('refuses an expired token with 1003 and records the refusal (the signature still proves the sender)', async () => {
    const env = envelope();
    const expired = mintToken(agent.agentId, 60, Math.floor(Date.now() / 1000) - 3600);
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [await record(env, { 'reach-token': expired })] });
    const dead = await dlq.waitFor(byMessage(env.message_id));
    expect(dead.value).toMatchObject({ reason: 'INVALID', code: 1003 });
    expect(String(dead.value!.error)).toMatch(/expired/);
    const st = await status.waitFor(byMessage(env.message_id));
    expect(st.value).toMatchObject({ state: 'REJECTED', code: 1003, service: 'ingress' });
  });

  it("refuses an envelope whose producer is not the token's agent with 1003; the token's agent gets the receipt", async () => {
    const other = await registerProducer('impostor');
    const env = envelope();
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [await record(env, { 'reach-token': other.token })] });
    const dead = await dlq.waitFor(byMessage(env.message_id));
    expect(dead.value).toMatchObject({ reason: 'INVALID', code: 1003 });
    expect(String(dead.value!.error)).toMatch(new RegExp(`producer ${agent.agentId} is not the token's agent ${other.agentId}`));
    const st = await status.waitFor(byMessage(env.message_id));
    expect(st.value).toMatchObject({ state: 'REJECTED', code: 1003 });
    const receipt = await pending.waitFor((r) => r.value?.message_type === 'reach.receipt' && r.value.correlation_id === env.message_id);
    expect(receipt.value).toMatchObject({ target_agent_id: other.agentId });
    expect(pending.records.some((r) => r.value?.message_id === env.message_id)).toBe(false);
  });

  it('accepts a record under the admin token for any producer (replays of dead letters)', async () => {
    const env = envelope();
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [await record(env, { 'reach-token': adminToken() })] });
    const got = await pending.waitFor((r) => r.value?.message_id === env.message_id);
    expect(got.value).toMatchObject({ producer: agent.agentId });
  });

  it('forwards a message with an idempotency key once: a second message with the same key is not forwarded', async () => {
    const session = uniq('session');
    const key = uniq('idem');
    const first = envelope({ idempotency_key: key, session_id: session });
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [await record(first)] });
    await pending.waitFor((r) => r.value?.message_id === first.message_id);

    // The retry (a new message id, the same key) and then an unrelated sentinel of the same
    // session: one partition, in order, so once the sentinel is through, a forwarded duplicate
    // would already be on reach.pending.v1.
    const retry = envelope({ idempotency_key: key, session_id: session });
    const sentinel = envelope({ session_id: session });
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [await record(retry), await record(sentinel)] });
    await pending.waitFor((r) => r.value?.message_id === sentinel.message_id);
    expect(pending.records.filter((r) => r.value?.message_id === retry.message_id)).toEqual([]);
    expect(pending.records.filter((r) => r.value?.message_id === first.message_id)).toHaveLength(1);
    expect(dlq.records.some(byMessage(retry.message_id))).toBe(false);
  });
});

// Issue #13: a flood of refusals is folded. Per producer, code and second the first
// REACH_DLQ_FLOOD_SAMPLE (3) refusals are dead letters of their own; the rest of that second
// become one dead letter carrying their count, so nothing is silent and nothing floods.
describe('a flood of Kafka refusals', () => {
  it('keeps the first few of each second in full and folds the rest into one counted dead letter per second', async () => {
    const flooder = uniq('it.flooder');
    // signed by the stack but expired: the producer is proven (the count is kept against it), the record refused (1003)
    const expired = mintToken(flooder, -60);
    const N = 60;
    const envs = Array.from({ length: N }, () => envelope({ producer: flooder }));
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: await Promise.all(envs.map((e) => record(e, { 'reach-token': expired }))) });

    const ofFlooder = () => dlq.records.filter((r) => r.value?.producer === flooder);
    const foldedCount = (r: { value?: Record<string, unknown> }) =>
      (JSON.parse((r.value?.history_json as string | null) ?? '{}') as { folded_refusals?: { count: number } }).folded_refusals?.count;
    // every refusal is accounted for: kept in full, or counted in a folded entry
    await dlq.waitFor(() => ofFlooder().reduce((n, r) => n + (foldedCount(r) ?? 1), 0) >= N, 20_000);
    const entries = ofFlooder();
    const full = entries.filter((r) => foldedCount(r) === undefined);
    const folded = entries.filter((r) => foldedCount(r) !== undefined);
    expect(full.length + folded.reduce((n, r) => n + foldedCount(r)!, 0)).toBe(N);
    for (const r of full) expect(r.value).toMatchObject({ reason: 'INVALID', code: 1003, producer: flooder });
    expect(full.every((r) => envs.some((e) => e.message_id === r.value?.message_id))).toBe(true);
    for (const r of folded) {
      expect(r.value).toMatchObject({ reason: 'INVALID', code: 1003, producer: flooder, message_id: null, source_topic: 'reach.ingress.v1' });
      expect(r.value?.error).toMatch(/more refusals .* of producer .* with code 1003/);
    }
    // one folded entry per second at most, and at most 3 kept in full per second of it
    const seconds = new Set(folded.map((r) => (JSON.parse(r.value!.history_json as string) as { folded_refusals: { second: string } }).folded_refusals.second));
    expect(seconds.size).toBe(folded.length);
    expect(folded.length).toBeGreaterThan(0);
    expect(full.length).toBeLessThanOrEqual(3 * (seconds.size + 2));
    // the point of it all: far fewer dead letters than refused records
    expect(entries.length).toBeLessThan(N / 2);
  });
});
