import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { newId, newMessageId } from '@reach/core';
import { startTestAgent, stopTestAgents, testClient } from '@reach/sdk/testing';
import { adminToken, uniq, urls } from '../../helpers/env.js';
import { plainKafka, registryClient, TopicTap } from '../../helpers/kafka.js';
import { testEnvelope, statusEventOf } from '../../helpers/envelope.js';
import { scrape, total } from '../../helpers/metrics.js';
import { eventually } from '../../helpers/wait.js';

// No record can stall a stage: a record a stage can never process — undecodable, framed with a
// schema id nobody knows, or holding text PostgreSQL refuses (a NUL byte, a lone surrogate) — is
// parked where an operator sees it (reach.dlq.v1; reach.poison.v1 for the dead-letter stage
// itself, or the row stored with that text made storable), counted in
// reach_<service>_poison_records_total, and the records around it go on.

const kafka = plainKafka();
const registry = registryClient();
const client = testClient();
let producer: Producer;

beforeAll(async () => {
  producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
}, 30_000);
afterEach(stopTestAgents);
afterAll(async () => {
  await producer?.disconnect();
});

async function deadLetterValue(fields: Record<string, unknown>): Promise<Buffer> {
  const env = (fields.envelope as Record<string, unknown> | null | undefined) ?? null;
  return registry.encode(await registry.getLatestSchemaId('reach.dlq.v1-value'), {
    dlq_id: newId('dlq'),
    message_id: env?.message_id ?? null,
    reason: 'REJECTED',
    code: 3003,
    error: 'test: rejected',
    at: Date.now(),
    service: 'test',
    source_topic: 'reach.routed.v1',
    source_partition: 0,
    source_offset: 1,
    attempts: 0,
    producer: 'admin',
    trace_id: null,
    history_json: '[]',
    envelope: env,
    raw_key: null,
    raw_value: null,
    raw_headers: {},
    ...fields,
  });
}

interface DlqEntry {
  dlq_id: string;
  error: string | null;
  replayable: boolean;
  envelope?: { payload?: unknown } | null;
}

async function dlqEntry(id: string): Promise<DlqEntry | undefined> {
  const res = await fetch(`${urls.deadLetter}/v1/dlq/${id}`, { headers: { authorization: `Bearer ${adminToken()}` } });
  return res.status === 200 ? ((await res.json()) as DlqEntry) : undefined;
}

async function messageStatus(id: string): Promise<{ status: string; result?: unknown } | undefined> {
  const res = await fetch(`${urls.ingress}/v1/messages/${id}`, { headers: { authorization: `Bearer ${adminToken()}` } });
  return res.ok ? ((await res.json()) as { status: string; result?: unknown }) : undefined;
}

/** Garbage of the three kinds a decoder meets: not framed, an unknown schema id, empty. */
function undecodable(tag: string): Array<{ key: string; value: Buffer }> {
  return [
    { key: `poison-${tag}-garbage`, value: Buffer.from(`not an avro record ${tag}`) },
    { key: `poison-${tag}-schema`, value: Buffer.from([0, 0x7f, 0xff, 0xff, 0xf0, 1, 2, 3]) },
    { key: `poison-${tag}-empty`, value: Buffer.alloc(0) },
  ];
}

describe('poison records never stall a stage', () => {
  it('dead-letter stage: text PostgreSQL refuses is stored made storable (envelope bytes exact), an unstorable row goes to reach.poison.v1, and the dead letters after them on the partition are stored', async () => {
    const poisonTap = await new TopicTap(kafka, 'reach.poison.v1', null).open();
    const before = total(await scrape(urls.deadLetter), 'reach_dead_letter_poison_records_total');
    const nulId = newId('dlq');
    const surrogateId = newId('dlq');
    const unstorableId = newId('dlq');
    const afterId = newId('dlq');
    const surrogateEnvelope = testEnvelope({ capability: 'poison.cap', payload: Buffer.from('{"t":"\\ud83d"}') });
    // One partition, in this order: the good record after the bad ones must still be stored.
    await producer.send({
      topic: 'reach.dlq.v1',
      acks: -1,
      messages: [
        { partition: 0, key: nulId, value: await deadLetterValue({ dlq_id: nulId, error: 'agent said a\u0000b' }) },
        { partition: 0, key: surrogateId, value: await deadLetterValue({ dlq_id: surrogateId, envelope: surrogateEnvelope }) },
        // 250,000 years BC: JavaScript has that date, PostgreSQL's timestamptz does not.
        { partition: 0, key: unstorableId, value: await deadLetterValue({ dlq_id: unstorableId, at: -8e15 }) },
        { partition: 0, key: afterId, value: await deadLetterValue({ dlq_id: afterId }) },
      ],
    });
    const after = await eventually('the dead letter after the poison ones stored', () => dlqEntry(afterId), 30_000);
    expect(after.dlq_id).toBe(afterId);

    const nul = await dlqEntry(nulId);
    expect(nul?.error).toBe('agent said a\ufffdb');
    const surrogate = await dlqEntry(surrogateId);
    expect(surrogate?.replayable).toBe(true);

    const parked = await poisonTap.waitFor((r) => r.key === unstorableId, 20_000);
    expect(parked.headers['reach-poison-service']).toBe('dead-letter');
    expect(parked.headers['reach-poison-source']).toMatch(/^reach\.dlq\.v1\/0\/\d+$/);
    expect(parked.headers['reach-poison-error']).toBeTruthy();
    expect(await dlqEntry(unstorableId)).toBeUndefined();
    await poisonTap.close();

    const counted = await scrape(urls.deadLetter);
    expect(total(counted, 'reach_dead_letter_poison_records_total', { parked: 'poison_topic' })).toBeGreaterThanOrEqual(1);
    expect(total(counted, 'reach_dead_letter_poison_records_total')).toBeGreaterThanOrEqual(before + 1);
  });

  it('tracker: an event whose detail PostgreSQL refuses still moves its message (stored made storable), and the events after it are stored', async () => {
    const refused = newMessageId();
    const next = newMessageId();
    const now = Date.now();
    const encode = async (e: object) => registry.encode(await registry.getLatestSchemaId('reach.status.v1-value'), e);
    await producer.send({
      topic: 'reach.status.v1',
      acks: -1,
      messages: [
        {
          partition: 0,
          key: refused,
          value: await encode({
            ...statusEventOf({ event_id: newId('evt'), message_id: refused, state: 'DELIVERED', at: now, created_at: now - 5 }),
            detail_json: '{"result":{"status":"ok","payload":{"t":"\\ud83d"}}}',
          }),
        },
        {
          partition: 0,
          key: next,
          value: await encode(statusEventOf({ event_id: newId('evt'), message_id: next, state: 'PENDING', at: now, created_at: now })),
        },
      ],
    });
    const moved = await eventually('the refused event stored made storable', async () => {
      const s = await messageStatus(refused);
      return s?.status === 'DELIVERED' ? s : undefined;
    });
    expect(JSON.stringify(moved.result)).toContain('\ufffd');
    await eventually('the event after it stored', async () => (await messageStatus(next))?.status === 'PENDING');
    expect(total(await scrape(urls.tracker), 'reach_tracker_poison_records_total', { parked: 'stored_sanitized' })).toBeGreaterThanOrEqual(1);
  });

  it('every stage under load: poison records on every topic while SDK traffic flows — every message DELIVERED, none lost, each poison record counted', async () => {
    const capability = uniq('poison_load').replace(/-/g, '_');
    await startTestAgent({ handlers: { [capability]: async (m) => ({ echo: m.payload }) } });
    const services = {
      ingress: urls.ingress,
      router: urls.router,
      dispatcher: urls.dispatcher,
      'retry-scheduler': urls.retryScheduler,
      tracker: urls.tracker,
      'dead-letter': urls.deadLetter,
    };
    const poisonBefore: Record<string, number> = {};
    for (const [name, url] of Object.entries(services)) poisonBefore[name] = total(await scrape(url), `reach_${name.replace(/-/g, '_')}_poison_records_total`);

    const topics = ['reach.ingress.v1', 'reach.pending.v1', 'reach.routed.v1', 'reach.retry.v1', 'reach.status.v1', 'reach.status-batches.v1', 'reach.dlq.v1'];
    const ids: string[] = [];
    const rounds = 10;
    for (let round = 0; round < rounds; round++) {
      // 100 messages a round, with poison on every stage's topic in the middle of them
      const sends = Array.from({ length: 100 }, (_, i) => client.submit({ capability, payload: { round, i } }));
      await Promise.all(topics.map((topic) => producer.send({ topic, acks: -1, messages: undecodable(`${round}`) })));
      // and records whose content PostgreSQL refuses: a dead letter with a NUL, a status event with a lone surrogate
      const refusedAt = Date.now();
      await producer.send({
        topic: 'reach.dlq.v1',
        acks: -1,
        messages: [{ key: `nul-${round}`, value: await deadLetterValue({ error: `round ${round}: a\u0000b` }) }],
      });
      await producer.send({
        topic: 'reach.status.v1',
        acks: -1,
        messages: [
          {
            key: `nul-${round}`,
            value: await registry.encode(await registry.getLatestSchemaId('reach.status.v1-value'), {
              ...statusEventOf({ event_id: newId('evt'), message_id: newMessageId(), state: 'PENDING', at: refusedAt, created_at: refusedAt }),
              state: 'DELIVERED',
              detail_json: '{"result":{"status":"ok","payload":"\\ud83d"}}',
            }),
          },
        ],
      });
      for (const s of await Promise.all(sends)) ids.push(s.message_id);
      await new Promise((r) => setTimeout(r, 200));
    }

    const notDelivered = new Set(ids);
    await eventually(
      `all ${ids.length} messages DELIVERED`,
      async () => {
        for (const id of [...notDelivered]) if ((await messageStatus(id))?.status === 'DELIVERED') notDelivered.delete(id);
        return notDelivered.size === 0;
      },
      90_000,
    );
    expect(notDelivered.size).toBe(0);

    // Each stage parked every poison record of its topic: 3 per round.
    // (the tracker: undecodable ones of two topics, and a refused status event a round stored made
    // storable; the dead-letter stage: undecodable ones stored raw — its NUL dead letters are made storable
    // before the insert, so PostgreSQL never refuses them)
    const expected = {
      ingress: 3 * rounds,
      router: 3 * rounds,
      dispatcher: 3 * rounds,
      'retry-scheduler': 3 * rounds,
      tracker: 2 * 3 * rounds + rounds,
      'dead-letter': 3 * rounds,
    };
    for (const [name, n] of Object.entries(expected)) {
      const url = services[name as keyof typeof services];
      await eventually(`${name} counted its ${n} poison records`, async () => {
        const now = total(await scrape(url), `reach_${name.replace(/-/g, '_')}_poison_records_total`);
        return now - poisonBefore[name]! >= n;
      });
    }
  }, 180_000);
});
