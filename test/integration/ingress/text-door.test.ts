import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { stopTestAgents } from '@reach/sdk/testing';
import { testEnvelope } from '../../helpers/envelope.js';
import { plainKafka, registryClient, TopicTap } from '../../helpers/kafka.js';
import { urls } from '../../helpers/env.js';
import { cap, entriesOf, eventually, message, sendToIngress } from '../dead-letter/dlq-helpers.js';
import { deregisterAgents, messageIdOf, registeredAgent } from '../dispatcher/harness.js';
import { registerProducer, type ProducerAgent } from './producer-agent.js';

// Issue 25 item 1: text no later stage can carry (a lone UTF-16 surrogate anywhere; NUL in the
// envelope's string fields) is refused at every public door with 4101 naming the field, and a
// refused Kafka record still ends queryable: a DLQ entry stored in PostgreSQL, the message
// REJECTED in the read model, a receipt to its producer. NUL inside a JSON payload is carried
// byte for byte. docs/protocol.md "Text the doors refuse".

const kafka = plainKafka();
let producer: Producer;
let pending: TopicTap<Record<string, unknown>>;
let agent: ProducerAgent;
const rawAgents: string[] = [];

beforeAll(async () => {
  agent = await registerProducer('text-door');
  producer = kafka.producer();
  await producer.connect();
  pending = await new TopicTap<Record<string, unknown>>(kafka, 'reach.pending.v1', registryClient()).open();
});

afterAll(async () => {
  await deregisterAgents(rawAgents);
  await stopTestAgents();
  await Promise.all([pending?.close(), producer?.disconnect()]);
});

/** POST /v1/messages with a body written as raw JSON text (so it can hold any escape). */
async function post(body: string, headers: Record<string, string> = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${urls.ingress}/v1/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${agent.token}`, 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('HTTP ingress', () => {
  it('refuses a JSON payload holding a lone surrogate with 400 4101 naming the payload', async () => {
    const r = await post('{"capability":"parse_pdf","payload":{"t":"\\ud83d"}}');
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code: 4101, name: 'INVALID_ENVELOPE', details: { field: 'payload' } });
  });

  it('refuses lone surrogates and NUL in envelope fields, tags and headers, naming each', async () => {
    const cases: Array<[string, string]> = [
      ['"request_id":"r\\u0000"', 'request_id'],
      ['"idempotency_key":"k\\udc00"', 'idempotency_key'],
      ['"tags":["ok","t\\ud83d"]', 'tags[1]'],
      ['"headers":{"reach-context-x":"v\\ud83d"}', 'headers.reach-context-x'],
      ['"content_type":"text/plain","payload":"a\\ud83d"', 'payload'],
    ];
    for (const [fields, field] of cases) {
      const r = await post(`{"capability":"parse_pdf",${fields}}`);
      expect(r.status, field).toBe(400);
      expect(r.body.error, field).toMatchObject({ code: 4101, details: { field } });
    }
  });

  it('carries NUL inside a JSON payload to the agent byte for byte, and a surrogate pair', async () => {
    const capability = cap('nulpayload');
    const { id, agent: raw } = await registeredAgent(capability);
    rawAgents.push(id);
    const r = await post(`{"capability":"${capability}","payload":{"t":"a\\u0000b","k\\u0000":"\\ud83d\\ude00"}}`);
    expect(r.status).toBe(202);
    const d = await raw.next((f) => f.type === 'deliver');
    expect((d.message as { payload: unknown }).payload).toEqual({ t: 'a\u0000b', 'k\u0000': '😀' });
    raw.send({ type: 'ack', seq: d.seq, message_id: messageIdOf(d) });
  });
});

describe('Kafka ingress', () => {
  it('sends a record whose JSON payload holds a lone surrogate to the DLQ (stored, INVALID 4101), REJECTED, with a receipt', async () => {
    const capability = cap('lonekafka');
    const env = testEnvelope({ capability, producer: agent.agentId, payload: Buffer.from('{"t":"\\ud83d"}') });
    const registry = registryClient();
    const value = await registry.encode(await registry.getLatestSchemaId('reach.ingress.v1-value'), env);
    const id = String(env.message_id);
    await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [{ key: id, value, headers: { 'reach-token': agent.token } }] });
    const [stored] = await eventually('the DLQ entry in PostgreSQL', async () => {
      const found = await entriesOf(capability, 'INVALID');
      return found.length > 0 && found;
    });
    expect(stored).toMatchObject({ message_id: id, code: 4101, reason: 'INVALID' });
    expect(await eventually('REJECTED in the read model', async () => (await message(id))?.status === 'REJECTED' && (await message(id)))).toMatchObject({
      status: 'REJECTED',
    });
    const receipt = await pending.waitFor((r) => r.value?.message_type === 'reach.receipt' && r.value.correlation_id === id);
    expect(JSON.parse(Buffer.from(receipt.value!.payload as Buffer).toString())).toMatchObject({ message_id: id, code: 4101 });
  });

  it('sends a record with NUL in a string field to the DLQ as well (the row is storable)', async () => {
    const capability = cap('nulkafka');
    const env = testEnvelope({ capability, request_id: 'r\u0000x' });
    await sendToIngress(producer, env);
    const [stored] = await eventually('the DLQ entry in PostgreSQL', async () => {
      const found = await entriesOf(capability, 'INVALID');
      return found.length > 0 && found;
    });
    expect(stored).toMatchObject({ message_id: env.message_id, code: 4101 });
  });
});

describe('the dispatcher WebSocket', () => {
  it('answers a `send` holding a lone surrogate with error 4101 for its client_ref', async () => {
    const capability = cap('wssend');
    const { id, agent: raw } = await registeredAgent(capability);
    rawAgents.push(id);
    raw.send({ type: 'send', client_ref: 'c1', capability: 'parse_pdf', payload: { t: '\udc00' } });
    const error = await raw.next((f) => f.type === 'error' && f.client_ref === 'c1');
    expect(error).toMatchObject({ code: 4101, name: 'INVALID_ENVELOPE' });
    expect(String(error.message)).toMatch(/lone UTF-16 surrogate/);
  });

  it('records a reject whose reason holds a lone surrogate and NUL (made storable), so the message ends REJECTED', async () => {
    const capability = cap('wsreject');
    const { id, agent: raw } = await registeredAgent(capability);
    rawAgents.push(id);
    const r = await post(`{"capability":"${capability}","payload":{}}`);
    expect(r.status).toBe(202);
    const messageId = String(r.body.message_id);
    const d = await raw.next((f) => f.type === 'deliver');
    raw.send({ type: 'reject', seq: d.seq, message_id: messageId, code: 'bad\u0000', reason: 'no \ud83d here\u0000', retryable: false });
    const final = await eventually('REJECTED in the read model', async () => {
      const m = (await message(messageId)) as (Record<string, unknown> & { status: string }) | undefined;
      return m?.status === 'REJECTED' && m;
    });
    expect(final).toMatchObject({ code: 3003, reason: 'no \ufffd here\ufffd' });
  });
});
