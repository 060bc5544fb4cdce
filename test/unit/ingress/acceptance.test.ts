import { beforeAll, describe, expect, it } from 'vitest';
import { newMessageId, ReachError, signToken, silentLogger } from '@reach/core';
import type { SchemaCodec, DeadLetter, Envelope, StatusEvent } from '@reach/envelope';
import type { InRecord, OutRecord } from '@reach/kafka';
import { Acceptor, type Acceptance } from '../../../services/ingress/dist/acceptance.js';
import { Authenticator } from '../../../services/ingress/dist/auth.js';
import type { IdempotencyClaim } from '../../../services/ingress/dist/idempotency.js';
import { makeCodec } from '../envelope/fake-registry.js';
import { envelopeOf } from '../../helpers/envelope.js';

const SECRET = 'unit-test-secret-0123456789';
const now = Date.now();
const token = (sub: string, exp = Math.floor(now / 1000) + 600) =>
  signToken({ sub, jti: `j-${sub}-${exp}`, iat: Math.floor(now / 1000), exp, dom: 'default' }, SECRET);
const auth = new Authenticator(SECRET, 'unit-admin-token-0123456789', { has: () => false });

let codec: SchemaCodec;
const claims: Array<[string, string, string]> = [];
let nextClaim: IdempotencyClaim = { kind: 'new' };
let acceptor: Acceptor;

beforeAll(async () => {
  // Ingress reads reach.ingress.v1 and writes reach.pending.v1 (both Envelope).
  ({ codec } = await makeCodec(undefined, [{ subject: 'reach.pending.v1-value', schema: 'reach.v1.Envelope' }]));
  acceptor = new Acceptor({
    codec,
    auth,
    idempotency: {
      claim: async (producer, key, id) => {
        claims.push([producer, key, id]);
        return nextClaim;
      },
    },
    service: 'ingress',
    instance: 'ingress-unit',
    maxPayloadBytes: 256 * 1024,
    log: silentLogger,
  });
});

function envelope(over: Partial<Envelope> = {}): Envelope {
  return envelopeOf({ message_id: newMessageId(now), producer: 'agent.a', created_at: now, ...over });
}

function kafkaRecord(headers: Record<string, string>): InRecord {
  return { topic: 'reach.ingress.v1', partition: 2, offset: '41', timestamp: String(now), key: null, value: Buffer.from([0]), headers };
}

async function decoded(records: readonly OutRecord[]) {
  const by = async <T>(topic: string) =>
    Promise.all(
      records
        .filter((r) => r.topic === topic)
        .map((r) =>
          codec.decode<T>(
            topic === 'reach.status-batches.v1' ? 'reach.status.v1-value' : topic === 'reach.dlq.v1' ? 'reach.dlq.v1-value' : 'reach.pending.v1-value',
            r.value,
          ),
        ),
    );
  return {
    pending: await by<Envelope>('reach.pending.v1'),
    status: await by<StatusEvent>('reach.status-batches.v1'),
    dlq: await by<DeadLetter>('reach.dlq.v1'),
  };
}

function rejected(a: Acceptance): Extract<Acceptance, { outcome: 'rejected' }> {
  expect(a.outcome).toBe('rejected');
  return a as Extract<Acceptance, { outcome: 'rejected' }>;
}

describe('Acceptor', () => {
  it('accepts a valid envelope: the envelope on reach.pending.v1 (key session ?? id, traceparent) and a PENDING status', async () => {
    const env = envelope({ session_id: 'sess-1' });
    const a = await acceptor.accept({ envelope: env, token: token('agent.a'), via: { kind: 'kafka', record: kafkaRecord({}) } }, now);
    expect(a.outcome).toBe('accepted');
    const records = (a as { records: readonly OutRecord[] }).records;
    expect(records[0]).toMatchObject({
      topic: 'reach.pending.v1',
      key: 'sess-1',
      headers: { traceparent: expect.stringMatching(/^00-4bf92f3577b34da6a3ce929d0e0e4736-/) },
    });
    const { pending, status } = await decoded(records);
    expect(pending[0]).toMatchObject({ message_id: env.message_id, producer: 'agent.a' });
    expect(status[0]).toMatchObject({ message_id: env.message_id, state: 'PENDING', service: 'ingress', instance: 'ingress-unit' });
    // producer_domain: the token's domain, for REACH_READS_SAME_DOMAIN (read-access.ts)
    expect(JSON.parse(status[0]!.detail_json!)).toEqual({ via: 'kafka', partition: 2, offset: '41', producer_domain: 'default' });
  });

  it('refuses a missing token (1003): DLQ without the token header, a receipt to the named producer, no status', async () => {
    const env = envelope({ reply_to: 'agent.elsewhere' });
    const a = rejected(
      await acceptor.accept({ envelope: env, token: undefined, via: { kind: 'kafka', record: kafkaRecord({ 'reach-token': 'x', keep: 'me' }) } }, now),
    );
    expect(a.error.code).toBe(1003);
    const { pending, status, dlq } = await decoded(a.records);
    expect(dlq[0]).toMatchObject({ reason: 'INVALID', code: 1003, message_id: env.message_id, raw_headers: { keep: 'me' } });
    expect(dlq[0]!.raw_headers).not.toHaveProperty('reach-token');
    expect(status).toEqual([]);
    // Never redirected through reply_to by someone who proved nothing.
    expect(pending[0]).toMatchObject({ message_type: 'reach.receipt', target_agent_id: 'agent.a', correlation_id: env.message_id });
  });

  it("refuses a producer that is not the token's agent: status REJECTED, the receipt to the token's agent", async () => {
    const env = envelope({ producer: 'agent.victim' });
    const a = rejected(await acceptor.accept({ envelope: env, token: token('agent.a'), via: { kind: 'kafka', record: kafkaRecord({}) } }, now));
    expect(a.error.code).toBe(1003);
    const { pending, status } = await decoded(a.records);
    expect(status[0]).toMatchObject({ state: 'REJECTED', code: 1003 });
    expect(pending[0]).toMatchObject({ message_type: 'reach.receipt', target_agent_id: 'agent.a' });
  });

  it('refuses a broken envelope (4101) before claiming its key; the receipt honours reply_to', async () => {
    claims.length = 0;
    const env = envelope({ topic: 'news', idempotency_key: 'k', reply_to: 'agent.inbox' });
    const a = rejected(await acceptor.accept({ envelope: env, token: token('agent.a'), via: { kind: 'kafka', record: kafkaRecord({}) } }, now));
    expect(a.error.code).toBe(4101);
    expect(claims).toEqual([]);
    const { pending, status, dlq } = await decoded(a.records);
    expect(dlq[0]).toMatchObject({ reason: 'INVALID', code: 4101 });
    expect(dlq[0]!.envelope).toMatchObject({ message_id: env.message_id });
    expect(status[0]).toMatchObject({ state: 'REJECTED', code: 4101 });
    expect(pending[0]).toMatchObject({ target_agent_id: 'agent.inbox' });
  });

  it('refuses an envelope the schema cannot carry (an int out of range) without claiming its key', async () => {
    claims.length = 0;
    const env = envelope({ timeout_ms: 2 ** 40, idempotency_key: 'k' });
    const a = rejected(await acceptor.accept({ envelope: env, token: token('agent.a'), via: { kind: 'http' } }, now));
    expect(a.error.code).toBe(4101);
    expect(claims).toEqual([]);
    expect(a.records).toEqual([]);
  });

  it('writes nothing for a refused HTTP submission (no dead letter, no status, no receipt): the response is the answer (issue #13)', async () => {
    const a = rejected(
      await acceptor.accept({ envelope: envelope({ payload: Buffer.alloc(256 * 1024 + 1) }), token: token('agent.a'), via: { kind: 'http' } }, now),
    );
    expect(a.error.code).toBe(4102);
    expect(a.records).toEqual([]);
  });

  it('claims the idempotency key for the producer, and produces nothing for a duplicate', async () => {
    claims.length = 0;
    const env = envelope({ idempotency_key: 'order-7' });
    nextClaim = { kind: 'duplicate', messageId: 'msg_ORIGINAL' };
    try {
      const a = await acceptor.accept({ envelope: env, token: token('agent.a'), via: { kind: 'http' } }, now);
      expect(a).toMatchObject({ outcome: 'duplicate', originalId: 'msg_ORIGINAL' });
      expect(claims).toEqual([['agent.a', 'order-7', env.message_id]]);
    } finally {
      nextClaim = { kind: 'new' };
    }
  });

  it('a replay (admin token, reach-attempt) gets reach-budget-from = its acceptance and clears the earlier chain; anyone else loses the header (issue #25)', async () => {
    const started: string[] = [];
    const replays = new Acceptor({
      codec,
      auth,
      idempotency: { claim: async () => ({ kind: 'new' }) },
      service: 'ingress',
      instance: 'ingress-unit',
      maxPayloadBytes: 256 * 1024,
      log: silentLogger,
      replayChains: { start: async (id) => void started.push(id) },
    });
    const forged = { 'reach-budget-from': String(now + 3_600_000) };
    const admin = 'unit-admin-token-0123456789';
    const replay = envelope({ producer: 'agent.a', created_at: now - 600_000, headers: forged });
    const a = await replays.accept({ envelope: replay, token: admin, attempt: 2, via: { kind: 'kafka', record: kafkaRecord({}) } }, now);
    const out = await decoded((a as { records: readonly OutRecord[] }).records);
    expect(out.pending[0]!.headers['reach-budget-from']).toBe(String(now));
    expect(out.pending[0]!.created_at).toBe(now - 600_000);
    expect(JSON.parse(out.status[0]!.detail_json!)).toMatchObject({ budget_from: new Date(now).toISOString() });
    expect(started).toEqual([replay.message_id]);

    // an agent's own value, or the admin's first send, is dropped: nobody stretches a budget
    for (const [tok, attempt] of [
      [token('agent.a'), 2],
      [admin, 0],
    ] as const) {
      const b = await replays.accept({ envelope: envelope({ headers: forged }), token: tok, attempt, via: { kind: 'kafka', record: kafkaRecord({}) } }, now);
      const o = await decoded((b as { records: readonly OutRecord[] }).records);
      expect(o.pending[0]!.headers).not.toHaveProperty('reach-budget-from');
      expect(JSON.parse(o.status[0]!.detail_json!)).not.toHaveProperty('budget_from');
    }
    expect(started).toHaveLength(1);
  });

  it('keeps only the raw bytes of an undecodable record, never its token', async () => {
    const [rec] = acceptor.undecodable(kafkaRecord({ 'reach-token': 'secret' }), new ReachError('INVALID_ENVELOPE', 'garbage'), now);
    const dead = await codec.decode<DeadLetter>('reach.dlq.v1-value', rec!.value);
    expect(dead).toMatchObject({ reason: 'INVALID', code: 4101, message_id: null, source_partition: 2, source_offset: 41, raw_headers: {} });
  });
});
