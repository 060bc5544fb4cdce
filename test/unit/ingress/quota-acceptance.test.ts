import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { newMessageId, ReachError, signToken, silentLogger } from '@reach/core';
import type { SchemaCodec, DeadLetter, Envelope, StatusEvent } from '@reach/envelope';
import type { InRecord, OutRecord } from '@reach/kafka';
import { Acceptor, type Acceptance } from '../../../services/ingress/dist/acceptance.js';
import { Authenticator } from '../../../services/ingress/dist/auth.js';
import type { IdempotencyClaim } from '../../../services/ingress/dist/idempotency.js';
import { Quotas, type QuotaGate, type QuotaVerdict } from '../../../services/ingress/dist/quotas.js';
import type { QuotaBuckets } from '../../../services/ingress/dist/quota-buckets.js';
import type { QuotaOverrides } from '../../../services/ingress/dist/quota-overrides.js';
import { makeCodec } from '../envelope/fake-registry.js';
import { envelopeOf } from '../../helpers/envelope.js';

// Where quotas sit in the one acceptance path (R-D7, R-C1): after auth and the envelope
// rules, before the idempotency key; over quota → the same refusal as every other one (DLQ, now
// with reason RATE_LIMITED, REJECTED 4129, a receipt on the Kafka path).
const SECRET = 'unit-test-secret-0123456789';
const ADMIN = 'unit-admin-token-0123456789';
const now = Date.now();
const token = (sub: string) => signToken({ sub, jti: `j-${sub}`, iat: Math.floor(now / 1000), exp: Math.floor(now / 1000) + 600, dom: 'default' }, SECRET);
const auth = new Authenticator(SECRET, ADMIN, { has: () => false });

let codec: SchemaCodec;
let acceptor: Acceptor;
let verdict: QuotaVerdict;
let claim: IdempotencyClaim | ReachError;
const admitted: string[] = [];
const givenBack: string[] = [];
const claimed: string[] = [];

const gate: QuotaGate = {
  admit: async (env) => {
    admitted.push(env.message_id);
    return verdict;
  },
  giveBack: async (producer) => {
    givenBack.push(producer);
  },
};

beforeAll(async () => {
  // Ingress reads reach.ingress.v1 and writes reach.pending.v1 (both Envelope).
  ({ codec } = await makeCodec(undefined, [{ subject: 'reach.pending.v1-value', schema: 'reach.v1.Envelope' }]));
  acceptor = new Acceptor({
    codec,
    auth,
    idempotency: {
      claim: async (_p, _k, id) => {
        claimed.push(id);
        if (claim instanceof ReachError) throw claim;
        return claim;
      },
    },
    quotas: gate,
    service: 'ingress',
    instance: 'ingress-unit',
    maxPayloadBytes: 256 * 1024,
    log: silentLogger,
  });
});

beforeEach(() => {
  verdict = { kind: 'admitted' };
  claim = { kind: 'new' };
  admitted.length = 0;
  givenBack.length = 0;
  claimed.length = 0;
});

function envelope(over: Partial<Envelope> = {}): Envelope {
  return envelopeOf({ message_id: newMessageId(now), producer: 'agent.q', created_at: now, ...over });
}

const kafkaVia = (): { kind: 'kafka'; record: InRecord } => ({
  kind: 'kafka',
  record: { topic: 'reach.ingress.v1', partition: 1, offset: '9', timestamp: String(now), key: null, value: Buffer.from([0]), headers: { 'reach-token': 't' } },
});

async function decoded(records: readonly OutRecord[]) {
  const subject = (topic: string) =>
    topic === 'reach.status-batches.v1' ? 'reach.status.v1-value' : topic === 'reach.dlq.v1' ? 'reach.dlq.v1-value' : 'reach.pending.v1-value';
  const by = <T>(topic: string) => Promise.all(records.filter((r) => r.topic === topic).map((r) => codec.decode<T>(subject(topic), r.value)));
  return {
    pending: await by<Envelope>('reach.pending.v1'),
    status: await by<StatusEvent>('reach.status-batches.v1'),
    dlq: await by<DeadLetter>('reach.dlq.v1'),
  };
}

// The refusal Quotas itself builds (limit 2/s, burst 3, a token back in 1.4 s).
const limited = (): QuotaVerdict => ({ kind: 'limited', error: quotaError });
let quotaError: Extract<QuotaVerdict, { kind: 'limited' }>['error'];

beforeAll(async () => {
  const quotas = new Quotas(
    { limitFor: () => ({ ratePerS: 2, burst: 3 }) } as unknown as QuotaOverrides,
    { take: async () => ({ allowed: false, waitMs: 1400, local: false }), degraded: false } as unknown as QuotaBuckets,
    async () => undefined,
  );
  const v = await quotas.admit(envelope());
  if (v.kind !== 'limited') throw new Error('expected limited');
  quotaError = v.error;
});

describe('quotas in the acceptance path', () => {
  it('over quota on Kafka: DLQ reason RATE_LIMITED with 4129, REJECTED 4129, a receipt; the key is never claimed', async () => {
    verdict = limited();
    const env = envelope({ idempotency_key: 'k1' });
    const a = (await acceptor.accept({ envelope: env, token: token('agent.q'), via: kafkaVia() }, now)) as Extract<Acceptance, { outcome: 'rejected' }>;
    expect(a.outcome).toBe('rejected');
    expect(a.error).toMatchObject({ code: 4129, codeName: 'RATE_LIMITED', httpStatus: 429, details: { retry_after_s: 2, retry_after_ms: 1400 } });
    expect(claimed).toEqual([]);
    const { pending, status, dlq } = await decoded(a.records);
    expect(dlq[0]).toMatchObject({ reason: 'RATE_LIMITED', code: 4129, message_id: env.message_id, producer: 'agent.q' });
    expect(dlq[0]!.error).toMatch(/over its quota of 2 msg\/s \(burst 3\)/);
    expect(status[0]).toMatchObject({ state: 'REJECTED', code: 4129, message_id: env.message_id });
    expect(pending[0]).toMatchObject({ message_type: 'reach.receipt', target_agent_id: 'agent.q', correlation_id: env.message_id });
  });

  it('over quota on HTTP: nothing is written, the 429 is the answer (issue #13: refusals do not flood the DLQ)', async () => {
    verdict = limited();
    const a = await acceptor.accept({ envelope: envelope(), token: token('agent.q'), via: { kind: 'http' } }, now);
    expect(a.outcome).toBe('rejected');
    expect((a as { records: readonly OutRecord[] }).records).toEqual([]);
  });

  it('meters only proven, valid messages: a bad token or a broken envelope costs no quota', async () => {
    await acceptor.accept({ envelope: envelope(), token: 'rt1.forged.token', via: kafkaVia() }, now);
    await acceptor.accept({ envelope: envelope({ topic: 'both-targets' }), token: token('agent.q'), via: kafkaVia() }, now);
    expect(admitted).toEqual([]);
  });

  it('does not meter the admin token (operator sends, dead-letter replays)', async () => {
    verdict = limited();
    const a = await acceptor.accept({ envelope: envelope({ producer: 'agent.q' }), token: ADMIN, via: kafkaVia() }, now);
    expect(a.outcome).toBe('accepted');
    expect(admitted).toEqual([]);
  });

  it('gives the token back when the idempotency key shows a duplicate', async () => {
    claim = { kind: 'duplicate', messageId: 'msg_FIRST' };
    const a = await acceptor.accept({ envelope: envelope({ idempotency_key: 'k2' }), token: token('agent.q'), via: { kind: 'http' } }, now);
    expect(a).toMatchObject({ outcome: 'duplicate', originalId: 'msg_FIRST' });
    expect(givenBack).toEqual(['agent.q']);
  });

  it('gives the token back when the idempotency store fails, so the retried record costs one token in all', async () => {
    const env = envelope({ idempotency_key: 'k4' });
    claim = new ReachError('DEPENDENCY_UNAVAILABLE', 'idempotency keys unavailable: neither Redis nor PostgreSQL answered');
    await expect(acceptor.accept({ envelope: env, token: token('agent.q'), via: kafkaVia() }, now)).rejects.toMatchObject({
      codeName: 'DEPENDENCY_UNAVAILABLE',
    });
    expect(givenBack).toEqual(['agent.q']);
    // The consume loop retries the record once the store answers: admitted again, kept this time.
    claim = { kind: 'new' };
    expect((await acceptor.accept({ envelope: env, token: token('agent.q'), via: kafkaVia() }, now)).outcome).toBe('accepted');
    expect(admitted).toEqual([env.message_id, env.message_id]);
    expect(givenBack).toEqual(['agent.q']);
  });

  it('answers a duplicate that arrives over quota as the duplicate, without claiming anything', async () => {
    verdict = { kind: 'duplicate', messageId: 'msg_FIRST' };
    const a = await acceptor.accept({ envelope: envelope({ idempotency_key: 'k3' }), token: token('agent.q'), via: kafkaVia() }, now);
    expect(a).toMatchObject({ outcome: 'duplicate', originalId: 'msg_FIRST' });
    expect(claimed).toEqual([]);
    expect(givenBack).toEqual([]);
  });
});

describe('Quotas (limit of the producer → its bucket)', () => {
  function quotas(allowed: boolean, holder: string | undefined, degraded = false) {
    const takes: Array<[string, number, number]> = [];
    const q = new Quotas(
      { limitFor: (a: string) => (a === 'agent.big' ? { ratePerS: 1000, burst: 50 } : { ratePerS: 100, burst: 200 }) } as unknown as QuotaOverrides,
      {
        take: async (p: string, l: { ratePerS: number; burst: number }, cost = 1) => {
          takes.push([p, l.ratePerS, cost]);
          return { allowed, waitMs: 10, local: degraded };
        },
        degraded,
      } as unknown as QuotaBuckets,
      async () => holder,
    );
    return { q, takes };
  }

  it("takes from the producer's bucket with the producer's override or the default", async () => {
    const { q, takes } = quotas(true, undefined);
    expect(await q.admit(envelope({ producer: 'agent.big' }))).toEqual({ kind: 'admitted' });
    expect(await q.admit(envelope({ producer: 'agent.small' }))).toEqual({ kind: 'admitted' });
    await q.giveBack('agent.big');
    expect(takes).toEqual([
      ['agent.big', 1000, 1],
      ['agent.small', 100, 1],
      ['agent.big', 1000, -1],
    ]);
  });

  it('refuses with 4129 and Retry-After ≥ 1 s, unless the key is held by another message', async () => {
    const refused = await quotas(false, undefined).q.admit(envelope({ idempotency_key: 'k' }));
    expect(refused).toMatchObject({ kind: 'limited', error: { code: 4129, details: { retry_after_s: 1, retry_after_ms: 10, rate_per_s: 100, burst: 200 } } });
    expect(await quotas(false, 'msg_OTHER').q.admit(envelope({ idempotency_key: 'k' }))).toEqual({ kind: 'duplicate', messageId: 'msg_OTHER' });
    // its own id (a Kafka record handled again) is not a duplicate of itself
    const env = envelope({ idempotency_key: 'k' });
    expect((await quotas(false, env.message_id).q.admit(env)).kind).toBe('limited');
    // without Redis, the key holder is not asked either
    expect((await quotas(false, 'msg_OTHER', true).q.admit(envelope({ idempotency_key: 'k' }))).kind).toBe('limited');
  });
});
