import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { ulid } from 'ulid';
import type { StatusEvent } from '@reach/envelope';
import { createPgPool, type Pool } from '../../../packages/store/dist/index.js';
import { plainKafka, registryClient, TopicTap } from '../../helpers/kafka.js';
import { stack, uniq, urls } from '../../helpers/env.js';
import { statusEventOf } from '../../helpers/envelope.js';

// The tracker folds reach.status.v1 into PostgreSQL `messages` (each with its timeline) (docs/design.md §1,
// R-D1). These tests play the other stages: they produce StatusEvents themselves, out of
// order and twice, to the real topic, and read the tables the running tracker writes.
const kafka = plainKafka();
const registry = registryClient();
let producer: Producer;
let pg: Pool;
let statusId: number;
let dlq: TopicTap<Record<string, unknown>>;

type State = StatusEvent['state'];

// Like every stage, events carry their message's created_at (the envelope's): one per message.
const createdAt = new Map<string, number>();

function event(messageId: string, state: State, at: number, extra: Partial<StatusEvent> = {}): StatusEvent {
  if (!createdAt.has(messageId)) createdAt.set(messageId, at - 10);
  return statusEventOf({
    event_id: `evt_${ulid()}`,
    message_id: messageId,
    state,
    at,
    created_at: createdAt.get(messageId)!,
    producer: 'it.producer',
    ...extra,
  });
}

type Ev = ReturnType<typeof event>;

/** Produces events as separate sends, in the order given (key = message_id, like every stage). */
async function emit(...events: Ev[]): Promise<void> {
  for (const e of events) {
    await producer.send({ topic: 'reach.status.v1', acks: -1, messages: [{ key: e.message_id, value: await registry.encode(statusId, e) }] });
  }
}

interface Row {
  status: string;
  attempt: number;
  agent_id: string | null;
  code: number | null;
  reason: string | null;
  result: unknown;
  created_at: Date;
  updated_at: Date;
  producer: string;
  rule: string | null;
}

async function rows(messageId: string): Promise<Row[]> {
  return (await pg.query<Row>('SELECT * FROM messages WHERE message_id = $1', [messageId])).rows;
}

async function timeline(messageId: string): Promise<Array<{ event_id: string; state: string; attempt: number; detail: unknown }>> {
  return (await pg.query('SELECT event_id, state, attempt, detail FROM message_timeline WHERE message_id = $1 ORDER BY at, event_id', [messageId])).rows;
}

/** Waits until the tracker has written `n` timeline rows of the message (it writes a little behind the topic). */
async function untilEvents(messageId: string, n: number, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await timeline(messageId)).length < n) {
    if (Date.now() > deadline) throw new Error(`tracker did not write ${n} events of ${messageId} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  statusId = await registry.getLatestSchemaId('reach.status.v1-value');
  producer = kafka.producer();
  await producer.connect();
  pg = createPgPool(stack.databaseUrl, { max: 2 });
  dlq = await new TopicTap<Record<string, unknown>>(kafka, 'reach.dlq.v1', registry).open();
});

afterAll(async () => {
  await Promise.all([producer?.disconnect(), pg?.end(), dlq?.close()]);
});

describe('tracker', () => {
  it('records each step with its timeline, in order', async () => {
    const id = `msg_${ulid()}`;
    const t = Date.now();
    await emit(
      event(id, 'PENDING', t),
      event(id, 'ROUTED', t + 1, { agent_id: 'it.a', detail_json: JSON.stringify({ rule: 'r-1', chosen: 'it.a' }) }),
      event(id, 'DELIVERING', t + 2, { agent_id: 'it.a' }),
      event(id, 'DELIVERED', t + 3, { agent_id: 'it.a' }),
    );
    await untilEvents(id, 4);
    const [row, ...more] = await rows(id);
    expect(more).toEqual([]);
    expect(row).toMatchObject({ status: 'DELIVERED', attempt: 0, agent_id: 'it.a', code: null, producer: 'it.producer', rule: 'r-1' });
    expect(row!.created_at.getTime()).toBe(t - 10);
    expect(row!.updated_at.getTime()).toBe(t + 3);
    expect((await timeline(id)).map((e) => e.state)).toEqual(['PENDING', 'ROUTED', 'DELIVERING', 'DELIVERED']);
  });

  it('only moves forward when events arrive out of order and twice', async () => {
    const id = `msg_${ulid()}`;
    const t = Date.now();
    const pending = event(id, 'PENDING', t);
    const routed = event(id, 'ROUTED', t + 1, { agent_id: 'it.b' });
    const delivering = event(id, 'DELIVERING', t + 2, { agent_id: 'it.b' });
    const delivered = event(id, 'DELIVERED', t + 3, { agent_id: 'it.b' });
    // The end first, then the rest backwards, then everything again (a redelivered batch),
    // and last a late PENDING of its own: same key, same partition, so once it is written
    // everything before it has been folded too.
    const late = event(id, 'PENDING', t + 100);
    await emit(delivered, delivering, routed, pending, delivered, pending, routed, late);
    await untilEvents(id, 5);
    const [row, ...more] = await rows(id);
    expect(more).toEqual([]);
    expect(row).toMatchObject({ status: 'DELIVERED', agent_id: 'it.b' });
    expect(row!.updated_at.getTime()).toBe(t + 3);
    const tl = await timeline(id);
    expect(tl.map((e) => e.event_id)).toEqual([pending, routed, delivering, delivered, late].map((e) => e.event_id));
  });

  it('folds a batch that holds several steps of one message, out of order, into its most advanced state', async () => {
    const id = `msg_${ulid()}`;
    const t = Date.now();
    const steps = [
      event(id, 'DELIVERED', t + 3, { agent_id: 'it.e' }),
      event(id, 'PENDING', t),
      event(id, 'DELIVERING', t + 2, { agent_id: 'it.e' }),
      event(id, 'ROUTED', t + 1, { agent_id: 'it.e' }),
    ];
    // One request: the tracker fetches them together.
    await producer.send({
      topic: 'reach.status.v1',
      acks: -1,
      messages: await Promise.all(steps.map(async (e) => ({ key: id, value: await registry.encode(statusId, e) }))),
    });
    await untilEvents(id, 4);
    expect(await rows(id)).toEqual([expect.objectContaining({ status: 'DELIVERED', agent_id: 'it.e', updated_at: new Date(t + 3) })]);
  });

  it('lets a retry (attempt + 1) start again at PENDING, and ignores late events of the earlier attempt', async () => {
    const id = `msg_${ulid()}`;
    const t = Date.now();
    await emit(
      event(id, 'PENDING', t),
      event(id, 'DELIVERING', t + 2, { agent_id: 'it.c1' }),
      event(id, 'PENDING', t + 10, { attempt: 1, code: 3002, reason: 'ack timeout; retrying' }),
      // Late: attempt 0's ROUTED and a REJECTED of attempt 0 must not win over attempt 1.
      event(id, 'ROUTED', t + 1, { agent_id: 'it.c1' }),
      event(id, 'REJECTED', t + 3, { agent_id: 'it.c1', code: 3002 }),
    );
    await untilEvents(id, 5);
    expect((await rows(id))[0]).toMatchObject({ status: 'PENDING', attempt: 1, agent_id: null, code: 3002, reason: 'ack timeout; retrying' });

    await emit(event(id, 'ROUTED', t + 11, { attempt: 1, agent_id: 'it.c2' }));
    await untilEvents(id, 6);
    expect((await rows(id))[0]).toMatchObject({ status: 'ROUTED', attempt: 1, agent_id: 'it.c2', code: null });
  });

  it('keeps a canceled message canceled (DEAD 3007, A2A CancelTask): a retry already under way does not bring it back; a DELIVERED written first stays', async () => {
    const id = `msg_${ulid()}`;
    const t = Date.now();
    await emit(
      event(id, 'PENDING', t),
      event(id, 'DELIVERING', t + 2, { agent_id: 'it.c1' }),
      // The cancel, at the attempt the read model showed …
      event(id, 'DEAD', t + 5, { code: 3007, reason: 'canceled by it.producer (A2A CancelTask)', service: 'ingress' }),
      // … then a retry that was scheduled just before it: the next attempt's PENDING and ROUTED.
      event(id, 'PENDING', t + 4, { attempt: 1, code: 3002, reason: 'attempt 0 failed' }),
      event(id, 'ROUTED', t + 6, { attempt: 1, agent_id: 'it.c2' }),
    );
    await untilEvents(id, 5);
    expect((await rows(id))[0]).toMatchObject({ status: 'DEAD', attempt: 0, code: 3007 });

    // A retry written first, then the cancel: the cancel still ends it.
    const other = `msg_${ulid()}`;
    await emit(event(other, 'PENDING', t), event(other, 'PENDING', t + 4, { attempt: 1, code: 3002 }), event(other, 'DEAD', t + 5, { code: 3007 }));
    await untilEvents(other, 3);
    expect((await rows(other))[0]).toMatchObject({ status: 'DEAD', attempt: 0, code: 3007 });

    // The ack that won the race: its DELIVERED is ahead of the cancel on the partition, and stays.
    const acked = `msg_${ulid()}`;
    await emit(
      event(acked, 'DELIVERING', t + 2, { agent_id: 'it.c1' }),
      event(acked, 'DELIVERED', t + 3, { agent_id: 'it.c1', detail_json: JSON.stringify({ result: { status: 'ok', payload: 1 } }) }),
      event(acked, 'DEAD', t + 5, { code: 3007 }),
    );
    await untilEvents(acked, 3);
    expect((await rows(acked))[0]).toMatchObject({ status: 'DELIVERED', code: null });
  });

  it("stores a handler's result from a status event's detail, also after the terminal state", async () => {
    const id = `msg_${ulid()}`;
    const t = Date.now();
    const result = { status: 'ok', payload: { pages: 3 } };
    await emit(event(id, 'PENDING', t), event(id, 'DELIVERED', t + 3, { agent_id: 'it.d' }));
    await untilEvents(id, 2);
    expect((await rows(id))[0]!.result).toBeNull();
    // Same state and attempt as what is stored: only the result is new.
    await emit(event(id, 'DELIVERED', t + 50, { agent_id: 'it.d', detail_json: JSON.stringify({ result }) }));
    await untilEvents(id, 3);
    const [row] = await rows(id);
    expect(row).toMatchObject({ status: 'DELIVERED', result });
  });

  it('files an event without created_at under the message it belongs to (no second row)', async () => {
    const id = `msg_${ulid(Date.now() - 5000)}`;
    const t = Date.now();
    await emit(event(id, 'PENDING', t));
    await untilEvents(id, 1);
    await emit(event(id, 'ROUTED', t + 1, { created_at: null, producer: null, message_type: null, trace_id: null }));
    await untilEvents(id, 2);
    const all = await rows(id);
    expect(all).toHaveLength(1);
    expect(all[0]).toMatchObject({ status: 'ROUTED', producer: 'it.producer' });
    expect(all[0]!.created_at.getTime()).toBe(t - 10);
  });

  it('keeps values PostgreSQL cannot store from blocking the partition (NUL characters, odd detail)', async () => {
    const id = `msg_${ulid()}`;
    const t = Date.now();
    await emit(
      event(id, 'PENDING', t, { reason: 'a\u0000b', detail_json: 'not json', priority: 'URGENT' }),
      event(id, 'ROUTED', t + 1, { detail_json: JSON.stringify({ s: 'x\u0000y' }) }),
    );
    await untilEvents(id, 2);
    const tl = await timeline(id);
    expect(tl[0]!.detail).toEqual({ raw: 'not json' });
    expect(tl[1]!.detail).toEqual({ s: 'xy' });
    expect((await rows(id))[0]).toMatchObject({ status: 'ROUTED' });
  });

  it('sends an undecodable status record to the DLQ and keeps going', async () => {
    const marker = uniq('tracker-garbage');
    await producer.send({ topic: 'reach.status.v1', acks: -1, messages: [{ key: marker, value: Buffer.from([0, 0, 0, 0, 0, 7, 7]) }] });
    const dead = await dlq.waitFor((r) => Buffer.from((r.value?.raw_key as Buffer | null) ?? []).toString() === marker);
    expect(dead.value).toMatchObject({ service: 'tracker', source_topic: 'reach.status.v1' });
    const id = `msg_${ulid()}`;
    await emit(event(id, 'PENDING', Date.now()));
    await untilEvents(id, 1);
  });

  it('exports reach_tracker_* metrics of its writes', async () => {
    const text = await (await fetch(`${urls.tracker}/metrics`)).text();
    expect(text).toMatch(/^reach_tracker_rows_written_total\{table="messages"\} [1-9]/m);
    expect(text).toMatch(/^reach_tracker_timeline_events_total [1-9]/m);
    expect(text).toMatch(/^reach_tracker_batch_size_events_count [1-9]/m);
    expect(text).toMatch(/^reach_tracker_write_duration_seconds_count [1-9]/m);
    expect(text).toMatch(/^reach_tracker_outcomes_total\{state="DELIVERED",first_attempt="true"\} [1-9]/m);
  });
});
