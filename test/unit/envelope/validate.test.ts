import { describe, expect, it } from 'vitest';
import { ReachError, newMessageId } from '@reach/core';
import { LATEST_EXPIRY, validateEnvelope, type Envelope } from '@reach/envelope';
import { envelopeOf } from '../../helpers/envelope.js';

const NOW = Date.UTC(2025, 5, 1, 12, 0, 0);
const LIMITS = { maxPayloadBytes: 1024 };

function valid(over: Partial<Envelope> = {}): Envelope {
  return envelopeOf({ message_id: newMessageId(NOW), capability: 'summarize', producer: 'agent-p', created_at: NOW, ...over });
}

function violation(env: Envelope, limits = LIMITS): ReachError {
  const err = validateEnvelope(env, limits, NOW);
  expect(err, 'expected a violation').toBeInstanceOf(ReachError);
  return err!;
}

describe('validateEnvelope', () => {
  it('accepts a valid envelope with each single target kind', () => {
    expect(validateEnvelope(valid(), LIMITS, NOW)).toBeUndefined();
    expect(validateEnvelope(valid({ capability: null, topic: 'news.tech' }), LIMITS, NOW)).toBeUndefined();
    expect(validateEnvelope(valid({ capability: null, target_agent_id: 'agent-42' }), LIMITS, NOW)).toBeUndefined();
  });

  it('4101 naming the fields when not exactly one of capability / topic / target_agent_id is set', () => {
    const cases: Array<Partial<Envelope>> = [
      { capability: null }, // 0
      { topic: 'news.tech' }, // 2: capability + topic
      { target_agent_id: 'agent-42' }, // 2: capability + target
      { capability: null, topic: 't', target_agent_id: 'a' }, // 2: topic + target
      { topic: 'news.tech', target_agent_id: 'agent-42' }, // 3
    ];
    const counts = [0, 2, 2, 2, 3];
    cases.forEach((over, i) => {
      const err = violation(valid(over));
      expect(err.code).toBe(4101);
      expect(err.codeName).toBe('INVALID_ENVELOPE');
      expect(err.message).toContain('exactly one of capability, topic, target_agent_id');
      expect(err.message).toContain(`got ${counts[i]}`);
      expect(err.details).toEqual({ field: 'capability|topic|target_agent_id' });
      expect(err.toBody().error).toMatchObject({ code: 4101, name: 'INVALID_ENVELOPE', details: { field: 'capability|topic|target_agent_id' } });
    });
  });

  it('4101 for a message_id that is not msg_ + ULID', () => {
    const ulid = newMessageId(NOW).slice(4);
    for (const id of ['', 'msg_', 'msg_123', `MSG_${ulid}`, `msg_${ulid.toLowerCase()}`, `msg_${ulid}X`, `msg_${ulid.slice(0, 25)}I`, `id_${ulid}`, ulid]) {
      const err = violation(valid({ message_id: id }));
      expect(err.code, id).toBe(4101);
      expect(err.details, id).toEqual({ field: 'message_id' });
    }
  });

  it('4102 for a payload over the limit; the limit itself is fine', () => {
    expect(validateEnvelope(valid({ payload: Buffer.alloc(1024) }), LIMITS, NOW)).toBeUndefined();
    const err = violation(valid({ payload: Buffer.alloc(1025) }));
    expect(err.code).toBe(4102);
    expect(err.codeName).toBe('PAYLOAD_TOO_LARGE');
    expect(err.httpStatus).toBe(413);
    expect(err.details).toEqual({ field: 'payload' });
  });

  it('4101 when expire_at is not after created_at', () => {
    for (const expire of [NOW - 1, NOW]) {
      const err = violation(valid({ expire_at: expire }));
      expect(err.code).toBe(4101);
      expect(err.details).toEqual({ field: 'expire_at' });
    }
    expect(validateEnvelope(valid({ expire_at: NOW + 1 }), LIMITS, NOW)).toBeUndefined();
  });

  it('4101 when expire_at is past the year 9999 (no store or SQL cast can spell it)', () => {
    for (const expire of [LATEST_EXPIRY, 8.64e15]) {
      const err = violation(valid({ expire_at: expire }));
      expect(err.code).toBe(4101);
      expect(err.details).toEqual({ field: 'expire_at' });
    }
    expect(validateEnvelope(valid({ expire_at: LATEST_EXPIRY - 1 }), LIMITS, NOW)).toBeUndefined();
  });

  it('4101 when created_at is far in the future (or not a plausible time)', () => {
    for (const created of [NOW + 10 * 60_000, NOW + 3600_000 * 24, 0, -5]) {
      const err = violation(valid({ created_at: created }));
      expect(err.code, String(created)).toBe(4101);
      expect(err.details).toEqual({ field: 'created_at' });
    }
    // Within the default 5 minute skew: fine. A tighter configured skew refuses it.
    expect(validateEnvelope(valid({ created_at: NOW + 60_000 }), LIMITS, NOW)).toBeUndefined();
    expect(validateEnvelope(valid({ created_at: NOW + 60_000 }), { ...LIMITS, maxClockSkewMs: 1000 }, NOW)?.code).toBe(4101);
    // The past is fine (a replayed or long-queued message).
    expect(validateEnvelope(valid({ created_at: NOW - 86_400_000 }), LIMITS, NOW)).toBeUndefined();
  });

  it('4101 naming the field for other structural rules', () => {
    const cases: Array<[Partial<Envelope>, string]> = [
      [{ message_type: '' }, 'message_type'],
      [{ producer: 'has space' }, 'producer'],
      [{ capability: 'bad capability!' }, 'capability'],
      [{ trace_id: '' }, 'trace_id'],
      [{ trace_id: 'x'.repeat(129) }, 'trace_id'],
      [{ idempotency_key: '' }, 'idempotency_key'],
      [{ timeout_ms: 0 }, 'timeout_ms'],
      [{ tags: [''] }, 'tags'],
      [{ headers: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`h${i}`, 'v'])) }, 'headers'],
    ];
    for (const [over, field] of cases) {
      const err = violation(valid(over));
      expect(err.code, field).toBe(4101);
      expect(err.details, field).toEqual({ field });
    }
  });
});
