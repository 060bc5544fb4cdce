import avro from 'avsc';
import { describe, expect, it } from 'vitest';
import { ReachError, newMessageId } from '@reach/core';
import {
  HEADER_BYTES,
  MAGIC_BYTE,
  SchemaCodec,
  schemaDef,
  type AgentRecord,
  type DeadLetter,
  type Envelope,
  type Presence,
  type RetryRequest,
  type RoutedDelivery,
  type StatusEvent,
} from '@reach/envelope';
import { FakeRegistry, SUBJECTS, frame, makeCodec } from './fake-registry.js';

const NOW = Date.UTC(2025, 5, 1, 12, 0, 0);

function fullEnvelope(): Envelope {
  return {
    message_id: newMessageId(NOW),
    message_type: 'task_request',
    capability: 'summarize',
    topic: 'news.tech',
    target_agent_id: 'agent-42',
    producer: 'agent-producer',
    trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
    request_id: 'req-1',
    idempotency_key: 'idem-1',
    session_id: 'sess-1',
    correlation_id: 'corr-1',
    reply_to: 'agent-producer',
    priority: 'HIGH',
    tags: ['a', 'b', 'ünïcødé'],
    retryable: false,
    timeout_ms: 30_000,
    created_at: NOW,
    expire_at: NOW + 60_000,
    schema_version: 3,
    content_type: 'application/octet-stream',
    payload: Buffer.from([0, 1, 2, 254, 255]),
    headers: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', 'x-k': 'v' },
  };
}

function minimalEnvelope(): Envelope {
  return {
    message_id: newMessageId(NOW),
    message_type: 'event',
    capability: null,
    topic: null,
    target_agent_id: null,
    producer: 'agent-producer',
    trace_id: 't',
    request_id: null,
    idempotency_key: null,
    session_id: null,
    correlation_id: null,
    reply_to: null,
    priority: 'NORMAL',
    tags: [],
    retryable: true,
    timeout_ms: null,
    created_at: NOW,
    expire_at: null,
    schema_version: 1,
    content_type: 'application/json',
    payload: Buffer.alloc(0),
    headers: {},
  };
}

async function expectReachError(p: Promise<unknown> | (() => unknown), code: number): Promise<ReachError> {
  let caught: unknown;
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (err) {
    caught = err;
  }
  expect(caught, `expected ReachError ${code}`).toBeInstanceOf(ReachError);
  expect((caught as ReachError).code).toBe(code);
  return caught as ReachError;
}

describe('SchemaCodec round trips', () => {
  it('encodes and decodes a full Envelope (every optional field set)', async () => {
    const { codec } = await makeCodec();
    const env = fullEnvelope();
    const bytes = codec.encode(SUBJECTS.envelope.subject, env);
    const back = await codec.decode<Envelope>(SUBJECTS.envelope.subject, bytes);
    expect(back).toEqual(env);
    expect(Buffer.isBuffer(back.payload)).toBe(true);
  });

  it('encodes and decodes an Envelope with every optional field null and empty collections', async () => {
    const { codec } = await makeCodec();
    const env = minimalEnvelope();
    const back = await codec.decode<Envelope>(SUBJECTS.envelope.subject, codec.encode(SUBJECTS.envelope.subject, env));
    expect(back).toEqual(env);
    for (const k of [
      'capability',
      'topic',
      'target_agent_id',
      'request_id',
      'idempotency_key',
      'session_id',
      'correlation_id',
      'reply_to',
      'timeout_ms',
      'expire_at',
    ] as const) {
      expect(back[k]).toBeNull();
    }
  });

  it('round-trips RoutedDelivery with a nested envelope', async () => {
    const { codec } = await makeCodec();
    const value: RoutedDelivery = {
      message_id: newMessageId(NOW),
      parent_message_id: newMessageId(NOW),
      agent_id: 'agent-42',
      attempt: 2,
      routed_at: NOW,
      deadline_at: NOW + 30_000,
      budget_deadline_at: NOW + 120_000,
      rule: 'prefer-eu',
      envelope: fullEnvelope(),
    };
    const back = await codec.decode<RoutedDelivery>(SUBJECTS.routed.subject, codec.encode(SUBJECTS.routed.subject, value));
    expect(back).toEqual(value);
    const nullable: RoutedDelivery = { ...value, parent_message_id: null, budget_deadline_at: null, rule: null, envelope: minimalEnvelope() };
    expect(await codec.decode(SUBJECTS.routed.subject, codec.encode(SUBJECTS.routed.subject, nullable))).toEqual(nullable);
  });

  it('round-trips StatusEvent (all fields, and all nullable fields null)', async () => {
    const { codec } = await makeCodec();
    const full: StatusEvent = {
      event_id: 'evt_1',
      message_id: newMessageId(NOW),
      state: 'DELIVERED',
      attempt: 1,
      at: NOW,
      service: 'dispatcher',
      instance: 'dispatcher-1',
      trace_id: 'trace',
      producer: 'agent-p',
      message_type: 'task_request',
      capability: 'summarize',
      topic: null,
      target_agent_id: null,
      agent_id: 'agent-42',
      parent_message_id: null,
      code: 3002,
      reason: 'ack timeout',
      detail_json: '{"candidates":2}',
      created_at: NOW - 5,
      expire_at: NOW + 5,
      idempotency_key: 'k',
      session_id: 's',
      correlation_id: 'c',
      request_id: 'r',
      reply_to: 'agent.reply',
      priority: 'HIGH',
    };
    expect(await codec.decode(SUBJECTS.status.subject, codec.encode(SUBJECTS.status.subject, full))).toEqual(full);
    const sparse: StatusEvent = {
      ...full,
      state: 'PENDING',
      attempt: 0,
      trace_id: null,
      producer: null,
      message_type: null,
      capability: null,
      agent_id: null,
      code: null,
      reason: null,
      detail_json: null,
      created_at: null,
      expire_at: null,
      idempotency_key: null,
      session_id: null,
      correlation_id: null,
      request_id: null,
      reply_to: null,
      priority: null,
    };
    expect(await codec.decode(SUBJECTS.status.subject, codec.encode(SUBJECTS.status.subject, sparse))).toEqual(sparse);
  });

  it('round-trips DeadLetter, with an envelope and with raw undecodable bytes', async () => {
    const { codec } = await makeCodec();
    const withEnvelope: DeadLetter = {
      dlq_id: 'dlq_1',
      message_id: newMessageId(NOW),
      reason: 'RETRIES_EXHAUSTED',
      code: 3004,
      error: 'every attempt failed',
      at: NOW,
      service: 'retry-scheduler',
      source_topic: 'reach.retry.v1',
      source_partition: 3,
      source_offset: 123_456_789_012,
      attempts: 5,
      producer: 'agent-p',
      trace_id: 'trace',
      history_json: '[{"agent":"a","code":3002}]',
      envelope: fullEnvelope(),
      raw_key: null,
      raw_value: null,
      raw_headers: { 'reach-token': 'redacted' },
    };
    expect(await codec.decode(SUBJECTS.dlq.subject, codec.encode(SUBJECTS.dlq.subject, withEnvelope))).toEqual(withEnvelope);
    const raw: DeadLetter = {
      ...withEnvelope,
      message_id: null,
      reason: 'INVALID',
      code: 4101,
      producer: null,
      trace_id: null,
      history_json: null,
      envelope: null,
      raw_key: Buffer.from('key'),
      raw_value: Buffer.from([0xde, 0xad, 0xbe, 0xef]),
      raw_headers: {},
    };
    expect(await codec.decode(SUBJECTS.dlq.subject, codec.encode(SUBJECTS.dlq.subject, raw))).toEqual(raw);
  });

  it('round-trips AgentRecord', async () => {
    const { codec } = await makeCodec();
    const value: AgentRecord = {
      agent_id: 'agent-42',
      agent_type: 'summarizer',
      status: 'COOLDOWN',
      revision: 2 ** 40,
      lease_id: 'lease_1',
      lease_expires_at: NOW + 30_000,
      ttl_s: 30,
      endpoints: { ws: 'ws://127.0.0.1:7412/v1/connect', http: null, protocol_version: '1' },
      capabilities: [
        { name: 'summarize', version: '2.1', mode: 'handle', tags: ['en', 'de'], consumption: 'batch', scope_json: '{"max":3}', constraints_json: null },
        { name: 'news.tech', version: null, mode: 'subscribe', tags: [], consumption: 'single', scope_json: null, constraints_json: '{}' },
      ],
      metadata: { max_concurrency: 4, region: 'eu-west-1', timezone: 'Europe/Berlin', model: 'm', domain: 'acme', weight: 0.25, extra: { a: 'b' } },
      load: { current_load: 3, queue_length: 7, avg_latency_ms: 12.5, health: 0.75 },
      qos: 0.5,
      registered_at: NOW - 1000,
      updated_at: NOW,
    };
    expect(await codec.decode(SUBJECTS.agents.subject, codec.encode(SUBJECTS.agents.subject, value))).toEqual(value);
  });

  it('round-trips Presence and RetryRequest', async () => {
    const { codec } = await makeCodec();
    const presence: Presence = { agent_id: 'agent-42', connected: true, dispatcher_instance: 'dispatcher-1', connection_id: 'conn_1', at: NOW };
    expect(await codec.decode(SUBJECTS.presence.subject, codec.encode(SUBJECTS.presence.subject, presence))).toEqual(presence);
    const gone: Presence = { agent_id: 'agent-42', connected: false, dispatcher_instance: null, connection_id: null, at: NOW };
    expect(await codec.decode(SUBJECTS.presence.subject, codec.encode(SUBJECTS.presence.subject, gone))).toEqual(gone);
    const retry: RetryRequest = {
      message_id: newMessageId(NOW),
      attempt: 1,
      not_before: NOW + 2000,
      code: 1002,
      reason: 'connection closed',
      failed_agent_id: 'agent-42',
      exclude_agent_ids: ['agent-42', 'agent-7'],
      first_attempt_at: NOW - 100,
      envelope: fullEnvelope(),
    };
    expect(await codec.decode(SUBJECTS.retry.subject, codec.encode(SUBJECTS.retry.subject, retry))).toEqual(retry);
  });

  it('inlines the Envelope definition into the schemas that reference it (self-contained documents)', () => {
    for (const name of ['reach.v1.RoutedDelivery', 'reach.v1.RetryRequest', 'reach.v1.DeadLetter']) {
      const def = schemaDef(name);
      expect(def.canonical).toContain('"name":"Envelope"');
      // The standalone document parses on its own, without the other files.
      expect(() => avro.Type.forSchema(JSON.parse(def.canonical) as avro.Schema)).not.toThrow();
    }
  });
});

describe('SchemaCodec framing', () => {
  it('writes magic byte 0 then the 4-byte big-endian schema id, then the Avro body', async () => {
    const { codec } = await makeCodec();
    const env = minimalEnvelope();
    const bytes = codec.encode(SUBJECTS.envelope.subject, env);
    const id = codec.schemaId(SUBJECTS.envelope.subject);
    expect(id).toBe(0x0a0b0c0d); // the fake registry's first id: every byte distinct
    expect(MAGIC_BYTE).toBe(0);
    expect(HEADER_BYTES).toBe(5);
    expect(bytes[0]).toBe(0);
    expect([...bytes.subarray(1, 5)]).toEqual([0x0a, 0x0b, 0x0c, 0x0d]);
    expect(bytes.subarray(5).equals(schemaDef('reach.v1.Envelope').type.toBuffer(env))).toBe(true);
  });

  it('uses the id of each subject it was bound to', async () => {
    const { codec } = await makeCodec();
    const ids = Object.values(SUBJECTS).map((s) => codec.schemaId(s.subject));
    expect(new Set(ids).size).toBe(ids.length);
    const presence: Presence = { agent_id: 'a', connected: true, dispatcher_instance: null, connection_id: null, at: NOW };
    expect(codec.encode(SUBJECTS.presence.subject, presence).readUInt32BE(1)).toBe(codec.schemaId(SUBJECTS.presence.subject));
  });

  it('refuses a subject that was not passed to init', async () => {
    const { codec } = await makeCodec();
    expect(() => codec.encode('nope-value', minimalEnvelope())).toThrow(/no schema bound to subject nope-value/);
  });
});

describe('SchemaCodec typed errors', () => {
  const subject = SUBJECTS.envelope.subject;

  it('4101 for null, empty and truncated records', async () => {
    const { codec } = await makeCodec();
    const good = codec.encode(subject, fullEnvelope());
    await expectReachError(codec.decode(subject, null), 4101);
    await expectReachError(codec.decode(subject, undefined), 4101);
    await expectReachError(codec.decode(subject, Buffer.alloc(0)), 4101);
    for (const len of [1, 4, 5, 6, 20, good.length - 1]) {
      const err = await expectReachError(codec.decode(subject, good.subarray(0, len)), 4101);
      expect(err.retryable).toBe(false);
    }
  });

  it('4101 for a wrong magic byte', async () => {
    const { codec } = await makeCodec();
    const bytes = Buffer.from(codec.encode(subject, fullEnvelope()));
    bytes[0] = 1;
    const err = await expectReachError(codec.decode(subject, bytes), 4101);
    expect(err.message).toMatch(/magic byte/);
    // A JSON producer's record (a common mistake) is refused the same way.
    await expectReachError(codec.decode(subject, Buffer.from('{"message_id":"msg_x"}')), 4101);
  });

  it('4101 for a garbage body behind a valid header', async () => {
    const { codec } = await makeCodec();
    const id = codec.schemaId(subject);
    await expectReachError(codec.decode(subject, frame(id, Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]))), 4101);
    await expectReachError(codec.decode(subject, frame(id, Buffer.from('not avro at all, just text'))), 4101);
    // A valid string prefix followed by an invalid union branch index (7) for `capability`.
    const body = Buffer.concat([Buffer.from([2, 0x61, 2, 0x62]), Buffer.from([14])]);
    await expectReachError(codec.decode(subject, frame(id, body)), 4101);
  });

  it('4101 for trailing bytes after a valid body', async () => {
    const { codec } = await makeCodec();
    const bytes = codec.encode(subject, fullEnvelope());
    const err = await expectReachError(codec.decode(subject, Buffer.concat([bytes, Buffer.from([0])])), 4101);
    expect(err.message).toMatch(/trailing/);
  });

  it('4101 on encode when the value does not match the schema, naming the field', async () => {
    const { codec } = await makeCodec();
    const bad = { ...fullEnvelope(), priority: 'URGENT' } as unknown as Envelope;
    const err = await expectReachError(() => codec.encode(subject, bad), 4101);
    expect(err.message).toContain('priority');
    const missing = { ...fullEnvelope(), producer: undefined } as unknown as Envelope;
    expect((await expectReachError(() => codec.encode(subject, missing), 4101)).message).toContain('producer');
  });

  it('4103 for a schema id the registry does not know, remembered so the registry is not asked again', async () => {
    const { codec, registry } = await makeCodec();
    const body = schemaDef('reach.v1.Envelope').type.toBuffer(fullEnvelope());
    const unknown = frame(999_999, body);
    const err = await expectReachError(codec.decode(subject, unknown), 4103);
    expect(err.message).toContain('999999');
    expect(err.retryable).toBe(false);
    expect(registry.getSchemaCalls).toEqual([999_999]);
    await expectReachError(codec.decode(subject, unknown), 4103);
    await expectReachError(codec.decode(subject, unknown), 4103);
    expect(registry.getSchemaCalls).toEqual([999_999]); // negative cache: no second lookup
    // A different unknown id is looked up (the cache is per id).
    await expectReachError(codec.decode(subject, frame(1_000_000, body)), 4103);
    expect(registry.getSchemaCalls).toEqual([999_999, 1_000_000]);
  });

  it('4103 when the writer schema cannot be resolved into the reader', async () => {
    const { codec, registry } = await makeCodec();
    const current = JSON.parse(schemaDef('reach.v1.Envelope').canonical) as { fields: Array<{ name: string; type: unknown }> };
    // Same record name, but `producer` (required, no default in the reader) is missing and
    // `message_id` has become an int: no Avro resolution exists.
    const incompatible = {
      ...current,
      fields: current.fields.filter((f) => f.name !== 'producer').map((f) => (f.name === 'message_id' ? { ...f, type: 'int' } : f)),
    };
    const id = registry.register('other-value', incompatible);
    const value = { ...minimalEnvelope(), message_id: 5 } as Record<string, unknown>;
    delete value.producer;
    const bytes = frame(id, avro.Type.forSchema(incompatible as avro.Schema).toBuffer(value));
    const err = await expectReachError(codec.decode(subject, bytes), 4103);
    expect(err.message).toContain('cannot be read as reach.v1.Envelope');
    // A writer of an entirely different record type cannot be read either.
    const presenceId = codec.schemaId(SUBJECTS.presence.subject);
    const presence = codec.encode(SUBJECTS.presence.subject, { agent_id: 'a', connected: true, dispatcher_instance: null, connection_id: null, at: NOW });
    expect(presence.readUInt32BE(1)).toBe(presenceId);
    await expectReachError(codec.decode(subject, presence), 4103);
  });

  it('4102 on encode when the payload is over the limit (also inside a nested envelope)', async () => {
    const { codec } = await makeCodec({ maxPayloadBytes: 1024 });
    expect(() => codec.encode(subject, { ...minimalEnvelope(), payload: Buffer.alloc(1024) })).not.toThrow();
    const err = await expectReachError(() => codec.encode(subject, { ...minimalEnvelope(), payload: Buffer.alloc(1025) }), 4102);
    expect(err.message).toContain('1025');
    const routed: RoutedDelivery = {
      message_id: newMessageId(NOW),
      parent_message_id: null,
      agent_id: 'a',
      attempt: 0,
      routed_at: NOW,
      deadline_at: NOW,
      budget_deadline_at: null,
      rule: null,
      envelope: { ...minimalEnvelope(), payload: Buffer.alloc(2048) },
    };
    await expectReachError(() => codec.encode(SUBJECTS.routed.subject, routed), 4102);
  });

  it('4102 on decode when the payload is over the limit', async () => {
    const big = await makeCodec({ maxPayloadBytes: 1024 * 1024 });
    const small = new SchemaCodec(big.registry.asClient(), { maxPayloadBytes: 1024 });
    await small.init([SUBJECTS.envelope]);
    // Over the limit by a little: decoded, then refused.
    const slightly = big.codec.encode(subject, { ...minimalEnvelope(), payload: Buffer.alloc(1025) });
    await expectReachError(small.decode(subject, slightly), 4102);
    // Far over the limit: refused from the frame size alone, before decoding.
    const huge = big.codec.encode(subject, { ...minimalEnvelope(), payload: Buffer.alloc(1024 + 70 * 1024) });
    const err = await expectReachError(small.decode(subject, huge), 4102);
    expect(err.message).toMatch(/exceeds the payload limit/);
    // At the limit: fine.
    const ok = big.codec.encode(subject, { ...minimalEnvelope(), payload: Buffer.alloc(1024) });
    expect((await small.decode<Envelope>(subject, ok)).payload.length).toBe(1024);
  });

  it('5002 (retryable) when the registry is unreachable, and no negative caching of that', async () => {
    const { codec, registry } = await makeCodec();
    const current = JSON.parse(schemaDef('reach.v1.Envelope').canonical) as { fields: Array<{ name: string }> };
    const older = { ...current, fields: current.fields.filter((f) => f.name !== 'headers') };
    const olderId = registry.register(subject, older);
    const value = { ...minimalEnvelope() } as Record<string, unknown>;
    delete value.headers;
    const bytes = frame(olderId, avro.Type.forSchema(older as avro.Schema).toBuffer(value));
    registry.down = true;
    const err = await expectReachError(codec.decode(subject, bytes), 5002);
    expect(err.retryable).toBe(true);
    expect(err.codeName).toBe('DEPENDENCY_UNAVAILABLE');
    // The record itself is fine: once the registry is back, the same bytes decode.
    registry.down = false;
    const back = await codec.decode<Envelope>(subject, bytes);
    expect(back.headers).toEqual({});
    expect(registry.getSchemaCalls).toEqual([olderId, olderId]);
  });

  it('init: 4103 when the schema is not registered, 5002 when the registry is unreachable', async () => {
    const empty = new FakeRegistry();
    const codec = new SchemaCodec(empty.asClient(), { maxPayloadBytes: 1024 });
    const notRegistered = await expectReachError(codec.init([SUBJECTS.envelope]), 4103);
    expect(notRegistered.message).toContain('reach.ingress.v1-value');
    expect(notRegistered.retryable).toBe(false);
    empty.down = true;
    const down = await expectReachError(new SchemaCodec(empty.asClient(), { maxPayloadBytes: 1024 }).init([SUBJECTS.envelope]), 5002);
    expect(down.retryable).toBe(true);
  });
});

describe('SchemaCodec schema evolution', () => {
  const subject = SUBJECTS.envelope.subject;

  it('reads an older writer version (without headers and content_type) with the defaults filled in', async () => {
    const { codec, registry } = await makeCodec();
    const current = JSON.parse(schemaDef('reach.v1.Envelope').canonical) as { fields: Array<{ name: string }> };
    const v1 = { ...current, fields: current.fields.filter((f) => f.name !== 'headers' && f.name !== 'content_type') };
    const v1Id = registry.register(subject, v1);
    expect(v1Id).not.toBe(codec.schemaId(subject));
    const { headers: _h, content_type: _c, ...old } = fullEnvelope();
    const bytes = frame(v1Id, avro.Type.forSchema(v1 as avro.Schema).toBuffer(old));
    const back = await codec.decode<Envelope>(subject, bytes);
    expect(back).toEqual({ ...old, content_type: 'application/json', headers: {} });
    // The resolver is cached: a second record of that writer does not ask the registry again.
    const again = await codec.decode<Envelope>(subject, frame(v1Id, avro.Type.forSchema(v1 as avro.Schema).toBuffer({ ...old, tags: ['x'] })));
    expect(again.tags).toEqual(['x']);
    expect(registry.getSchemaCalls).toEqual([v1Id]);
  });

  it('reads a newer writer that added an optional field (forward: unknown fields are skipped)', async () => {
    const { codec, registry } = await makeCodec();
    const current = JSON.parse(schemaDef('reach.v1.Envelope').canonical) as { fields: unknown[] };
    const v2 = {
      ...current,
      fields: [
        ...current.fields,
        { name: 'locale', type: ['null', 'string'], default: null },
        { name: 'hops', type: { type: 'array', items: 'string' }, default: [] },
      ],
    };
    const id = registry.register(subject, v2);
    const env = fullEnvelope();
    const bytes = frame(id, avro.Type.forSchema(v2 as avro.Schema).toBuffer({ ...env, locale: 'de-DE', hops: ['a', 'b'] }));
    expect(await codec.decode(subject, bytes)).toEqual(env);
  });
});
