import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { ulid } from 'ulid';
import { plainKafka, registryClient, TopicTap, statusTap } from '../../helpers/kafka.js';
import { waitForFlow } from './concurrency-harness.js';
import { agentId, agentToken, messageIdOf, Router, TestAgent, type Frame } from './harness.js';

// Deliveries over the running dispatcher (docs/design.md §4, R-C6, R-C7, R-C9): a RoutedDelivery
// produced to reach.routed.v1 reaches the agent's socket as a `deliver` frame; ack → DELIVERED,
// reject → REJECTED 3003, result → a DELIVERED event with the result and a correlated
// task_result on reach.ingress.v1; a reconnect with last_seq replays what is un-acked, in
// order; `send` produces the agent's envelope to reach.ingress.v1 under its token.
const kafka = plainKafka();
const registry = registryClient();
let producer: Producer;
let router: Router;
let status: TopicTap<Record<string, unknown>>;
let ingress: TopicTap<Record<string, unknown>>;

beforeAll(async () => {
  producer = kafka.producer();
  await producer.connect();
  router = await new Router(producer, registry).init();
  [status, ingress] = await Promise.all([
    statusTap<Record<string, unknown>>(kafka, registry).open(),
    new TopicTap<Record<string, unknown>>(kafka, 'reach.ingress.v1', registry).open(),
  ]);
});

afterAll(async () => {
  await Promise.all([status?.close(), ingress?.close(), producer?.disconnect()]);
});

function statusOf(messageId: string, state: string) {
  return status.waitFor((r) => r.value?.message_id === messageId && r.value?.state === state);
}

describe('dispatcher: deliveries', () => {
  it('delivers a routed message as a deliver frame; ack → DELIVERING then DELIVERED', async () => {
    const id = agentId();
    const { agent } = await TestAgent.connect(id);
    const env = await router.route(id, router.envelope({ payload: Buffer.from(JSON.stringify({ hello: 'world' })), tags: ['a'] }));

    const d = await agent.next((f) => f.type === 'deliver');
    expect(d).toMatchObject({ type: 'deliver', seq: 1, attempt: 0, deadline: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/) });
    expect(d.message).toMatchObject({
      message_id: env.message_id,
      capability: 'it_dispatch',
      producer: 'it.sender',
      trace_id: env.trace_id,
      payload: { hello: 'world' },
      tags: ['a'],
      created_at: new Date(env.created_at as number).toISOString(),
    });

    const delivering = await statusOf(env.message_id as string, 'DELIVERING');
    expect(delivering.value).toMatchObject({ service: 'dispatcher', agent_id: id, attempt: 0, trace_id: env.trace_id });
    expect(JSON.parse(delivering.value!.detail_json as string)).toMatchObject({ seq: 1, deadline: d.deadline, instance: expect.any(String) });

    agent.send({ type: 'ack', seq: 1, message_id: env.message_id });
    const delivered = await statusOf(env.message_id as string, 'DELIVERED');
    expect(delivered.value).toMatchObject({ service: 'dispatcher', agent_id: id, attempt: 0 });
    await agent.close();
  });

  it('gives a non-JSON payload as payload_b64', async () => {
    const id = agentId();
    const { agent } = await TestAgent.connect(id);
    const bytes = Buffer.from([0, 1, 2, 250, 251]);
    await router.route(id, router.envelope({ content_type: 'application/octet-stream', payload: bytes }));
    const d = await agent.next((f) => f.type === 'deliver');
    const m = d.message as Record<string, unknown>;
    expect(m.payload_b64).toBe(bytes.toString('base64'));
    expect(m.payload).toBeUndefined();
    await agent.close();
  });

  // A `retryable: true` reject is a failed attempt that is retried elsewhere (test/integration/reliability).
  it('a non-retryable reject → REJECTED with 3003 and the agent code and reason in the detail', async () => {
    const id = agentId();
    const { agent } = await TestAgent.connect(id);
    const env = await router.route(id);
    const d = await agent.next((f) => f.type === 'deliver');
    agent.send({ type: 'reject', seq: d.seq, message_id: env.message_id, code: 'BUSY', reason: 'queue full', retryable: false });
    const rejected = await statusOf(env.message_id as string, 'REJECTED');
    expect(rejected.value).toMatchObject({ code: 3003, reason: 'queue full', agent_id: id });
    expect(JSON.parse(rejected.value!.detail_json as string)).toEqual({ seq: d.seq, agent_code: 'BUSY', agent_reason: 'queue full', retryable: false });
    await agent.close();
  });

  it('answers an ack whose seq holds another message with a 4101 error', async () => {
    const id = agentId();
    const { agent } = await TestAgent.connect(id);
    await router.route(id);
    const d = await agent.next((f) => f.type === 'deliver');
    agent.send({ type: 'ack', seq: d.seq, message_id: `msg_${ulid()}` });
    expect(await agent.next((f) => f.type === 'error')).toMatchObject({ code: 4101, message: expect.stringMatching(/is not message/) });
    await agent.close();
  });

  it('replays every un-acked delivery after last_seq on reconnect, in order, without gaps', async () => {
    const id = agentId();
    const first = await TestAgent.connect(id);
    const batch1 = Array.from({ length: 10 }, (_, i) => router.envelope({ payload: Buffer.from(JSON.stringify({ i })) }));
    await router.routeMany(id, batch1);
    const got1 = await first.agent.waitCount((f) => f.type === 'deliver', 10);
    expect(got1.map((f) => f.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(got1.map(messageIdOf)).toEqual(batch1.map((e) => e.message_id));
    // Ack 1, 2, 3 and 5; the agent goes away having seen up to 7.
    for (const f of got1.filter((f) => [1, 2, 3, 5].includes(f.seq as number))) first.agent.send({ type: 'ack', seq: f.seq, message_id: messageIdOf(f) });
    await Promise.all(got1.filter((f) => [1, 2, 3, 5].includes(f.seq as number)).map((f) => statusOf(messageIdOf(f), 'DELIVERED')));
    await first.agent.close();

    // Routed while nobody is connected: buffered, not lost (nothing sent, so no DELIVERING yet).
    const batch2 = Array.from({ length: 5 }, (_, i) => router.envelope({ payload: Buffer.from(JSON.stringify({ i: 10 + i })) }));
    await router.routeMany(id, batch2);
    await waitForFlow(id, '11 in flight', (f) => f.in_flight === 11);

    const second = await TestAgent.connect(id, { lastSeq: 7 });
    expect(second.welcome.resume_from).toBe(7);
    const replay = await second.agent.waitCount((f) => f.type === 'deliver', 8);
    expect(replay.map((f) => f.seq)).toEqual([8, 9, 10, 11, 12, 13, 14, 15]);
    expect(replay.map(messageIdOf)).toEqual([...batch1.slice(7), ...batch2].map((e) => e.message_id));
    await second.agent.close();

    // Without last_seq: everything un-acked, from the oldest.
    const third = await TestAgent.connect(id);
    expect(third.welcome.resume_from).toBe(0);
    const all = await third.agent.waitCount((f) => f.type === 'deliver', 11);
    expect(all.map((f) => f.seq)).toEqual([4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
    // Live deliveries continue the sequence after the replay.
    await router.route(id);
    const live = await third.agent.next((f) => f.type === 'deliver' && f.seq === 16);
    expect(live.attempt).toBe(0);
    await third.agent.close();
  });

  it('result → DELIVERED with the result, and a correlated task_result to reply_to on reach.ingress.v1', async () => {
    const id = agentId();
    const requester = agentId('it.requester');
    const token = agentToken(id);
    const { agent } = await TestAgent.connect(id, { token });
    const env = await router.route(id, router.envelope({ reply_to: requester, session_id: 'sess-1' }));
    const d = await agent.next((f) => f.type === 'deliver');
    agent.send({ type: 'ack', seq: d.seq, message_id: env.message_id });
    await statusOf(env.message_id as string, 'DELIVERED');
    agent.send({ type: 'result', message_id: env.message_id, status: 'ok', payload: { answer: 42 } });

    const withResult = await status.waitFor(
      (r) => r.value?.message_id === env.message_id && typeof r.value?.detail_json === 'string' && r.value.detail_json.includes('"result"'),
    );
    expect(withResult.value).toMatchObject({ state: 'DELIVERED', agent_id: id });
    expect(JSON.parse(withResult.value!.detail_json as string)).toEqual({ result: { status: 'ok', payload: { answer: 42 } } });

    const reply = await ingress.waitFor((r) => r.value?.correlation_id === env.message_id);
    expect(reply.value).toMatchObject({
      message_type: 'task_result',
      target_agent_id: requester,
      capability: null,
      topic: null,
      producer: id,
      trace_id: env.trace_id,
      session_id: 'sess-1',
      content_type: 'application/json',
    });
    expect((reply.value!.headers as Record<string, string>)['reach-result-status']).toBe('ok');
    expect(JSON.parse(Buffer.from(reply.value!.payload as Buffer).toString())).toEqual({ answer: 42 });
    expect(reply.headers['reach-token']).toBe(token);
    expect(reply.key).toBe('sess-1');
    await agent.close();
  });

  it('a result before the ack counts as the ack (DELIVERED with the result, not replayed)', async () => {
    const id = agentId();
    const { agent } = await TestAgent.connect(id);
    const env = await router.route(id);
    const d = await agent.next((f) => f.type === 'deliver');
    agent.send({ type: 'result', message_id: env.message_id, status: 'error', payload: { why: 'no' } });
    const st = await status.waitFor((r) => r.value?.message_id === env.message_id && r.value?.state === 'DELIVERED');
    expect(JSON.parse(st.value!.detail_json as string)).toEqual({ result: { status: 'error', payload: { why: 'no' } } });
    await agent.close();
    const again = await TestAgent.connect(id);
    await router.route(id); // seq 2: the replay and this live one arrive; seq 1 must not
    const next = await again.agent.next((f) => f.type === 'deliver');
    expect(next.seq).toBe((d.seq as number) + 1);
    await again.agent.close();
  });

  it('answers a result for a message it never delivered with a 4101 error', async () => {
    const { agent } = await TestAgent.connect(agentId());
    agent.send({ type: 'result', message_id: `msg_${ulid()}`, status: 'ok', payload: 1 });
    expect(await agent.next((f) => f.type === 'error')).toMatchObject({ code: 4101, name: 'INVALID_ENVELOPE' });
    await agent.close();
  });

  it('send → accepted, and the envelope is on reach.ingress.v1 with the connection token', async () => {
    const id = agentId();
    const token = agentToken(id);
    const { agent } = await TestAgent.connect(id, { token });
    agent.send({ type: 'send', client_ref: 'r1', capability: 'summarize_text', payload: { text: 'hi' }, tags: ['t'], priority: 'HIGH' });
    const accepted = (await agent.next((f) => f.type === 'accepted')) as Frame & { message_id: string };
    expect(accepted).toMatchObject({ client_ref: 'r1', message_id: expect.stringMatching(/^msg_/) });
    const rec = await ingress.waitFor((r) => r.value?.message_id === accepted.message_id);
    expect(rec.value).toMatchObject({ producer: id, capability: 'summarize_text', priority: 'HIGH', tags: ['t'], message_type: 'task_request' });
    expect(JSON.parse(Buffer.from(rec.value!.payload as Buffer).toString())).toEqual({ text: 'hi' });
    expect(rec.headers['reach-token']).toBe(token);
    expect(rec.key).toBe(accepted.message_id);
    await agent.close();
  });

  it('send with an invalid envelope → error with the code and the client_ref', async () => {
    const { agent } = await TestAgent.connect(agentId());
    agent.send({ type: 'send', client_ref: 'two-targets', capability: 'a', topic: 'b', payload: {} });
    expect(await agent.next((f) => f.type === 'error')).toMatchObject({ code: 4101, name: 'INVALID_ENVELOPE', client_ref: 'two-targets' });
    agent.send({ type: 'send', client_ref: 'not-me', capability: 'a', producer: 'someone.else', payload: {} });
    expect(await agent.next((f) => f.type === 'error' && f.client_ref === 'not-me')).toMatchObject({ code: 1003, name: 'AUTH_FAILED' });
    await agent.close();
  });
});
