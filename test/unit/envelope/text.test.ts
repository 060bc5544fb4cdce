import { describe, expect, it } from 'vitest';
import { newMessageId } from '@reach/core';
import {
  checkEnvelopeText,
  checkJsonPayload,
  checkJsonValue,
  checkResult,
  checkText,
  envelopeFromJson,
  maxRecordBytes,
  storableEnvelopeJson,
  textProblem,
  toStorableText,
  validateEnvelope,
  type Envelope,
} from '@reach/envelope';
import { envelopeOf } from '../../helpers/envelope.js';

const NOW = Date.UTC(2025, 5, 1, 12, 0, 0);
const LONE_HIGH = '\ud83d';
const LONE_LOW = '\ude00';
const PAIR = '\ud83d\ude00'; // 😀

function valid(over: Partial<Envelope> = {}): Envelope {
  return envelopeOf({ message_id: newMessageId(NOW), capability: 'summarize', producer: 'agent-p', created_at: NOW, ...over });
}

describe('textProblem', () => {
  it('finds lone surrogates (high or low, at either end) and NUL unless allowed', () => {
    expect(textProblem(`a${PAIR}b`)).toBeUndefined();
    for (const s of [LONE_HIGH, `x${LONE_HIGH}`, `${LONE_HIGH}x`, LONE_LOW, `x${LONE_LOW}y`, `${LONE_LOW}${LONE_HIGH}`, `${PAIR}${LONE_HIGH}`]) {
      expect(textProblem(s), JSON.stringify(s)).toMatch(/lone UTF-16 surrogate/);
    }
    expect(textProblem('a\u0000b')).toMatch(/NUL/);
    expect(textProblem('a\u0000b', true)).toBeUndefined();
  });

  it('checkText names the field in a 4101', () => {
    const err = checkText(`id${LONE_HIGH}`, 'request_id')!;
    expect(err.code).toBe(4101);
    expect(err.details).toMatchObject({ field: 'request_id' });
    expect(checkText(null, 'x')).toBeUndefined();
  });
});

describe('checkJsonValue / checkJsonPayload', () => {
  it('finds a lone surrogate in a string or a key, however deep; NUL and pairs pass', () => {
    expect(checkJsonValue({ a: [1, { b: `x${PAIR}` }], 'k\u0000': 'a\u0000b' }, 'payload')).toBeUndefined();
    expect(checkJsonValue({ a: [1, { b: LONE_HIGH }] }, 'payload')?.code).toBe(4101);
    expect(checkJsonValue({ [`k${LONE_LOW}`]: 1 }, 'payload')?.code).toBe(4101);
    let deep: unknown = LONE_HIGH;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(checkJsonValue(deep, 'payload')?.code).toBe(4101);
  });

  it('reads JSON payload bytes: escapes of a lone surrogate are refused, of a pair accepted', () => {
    expect(checkJsonPayload(Buffer.from('{"t":"\\ud83d"}'))?.details).toMatchObject({ field: 'payload' });
    expect(checkJsonPayload(Buffer.from('{"\\udc00":1}'))?.code).toBe(4101);
    expect(checkJsonPayload(Buffer.from('{"t":"\\ud83d\\ude00"}'))).toBeUndefined();
    expect(checkJsonPayload(Buffer.from(JSON.stringify({ t: `a${PAIR}\u0000` })))).toBeUndefined();
    // An escaped backslash before "ud83d" is text, not an escape.
    expect(checkJsonPayload(Buffer.from(JSON.stringify({ t: '\\ud83d' })))).toBeUndefined();
    // Not JSON: handed over as bytes, not refused.
    expect(checkJsonPayload(Buffer.from('not json \\ud83d'))).toBeUndefined();
  });

  it('refuses JSON-labelled bytes that are not UTF-8 (they would be changed by decoding)', () => {
    expect(checkJsonPayload(Buffer.from([0x7b, 0x22, 0x74, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]))?.message).toMatch(/not UTF-8/);
    // CESU-8 of a lone surrogate: not UTF-8 either.
    expect(checkJsonPayload(Buffer.from([0x22, 0xed, 0xa0, 0xbd, 0x22]))?.code).toBe(4101);
  });
});

describe('checkEnvelopeText (part of validateEnvelope: every door)', () => {
  it('accepts ordinary text, pairs, and NUL inside a JSON payload', () => {
    const env = valid({ request_id: `r${PAIR}`, headers: { 'reach-context-x': PAIR }, payload: Buffer.from(JSON.stringify({ t: 'a\u0000b' })) });
    expect(validateEnvelope(env, { maxPayloadBytes: 1024 }, NOW)).toBeUndefined();
  });

  it('refuses lone surrogates and NUL in string fields, tags and headers, naming the field', () => {
    const cases: Array<[Partial<Envelope>, string]> = [
      [{ trace_id: `t${LONE_HIGH}` }, 'trace_id'],
      [{ request_id: 'r\u0000' }, 'request_id'],
      [{ idempotency_key: `k${LONE_LOW}` }, 'idempotency_key'],
      [{ correlation_id: 'c\u0000' }, 'correlation_id'],
      [{ content_type: 'text/plain\u0000' }, 'content_type'],
      [{ tags: ['ok', `t${LONE_HIGH}`] }, 'tags[1]'],
      [{ headers: { a: `v${LONE_HIGH}` } }, 'headers.a'],
      [{ headers: { 'k\u0000': 'v' } }, 'headers.k\\u0000'],
    ];
    for (const [over, field] of cases) {
      const err = validateEnvelope(valid(over), { maxPayloadBytes: 1024 }, NOW);
      expect(err?.code, field).toBe(4101);
      expect(err?.details, field).toMatchObject({ field });
    }
  });

  it('checks the payload as JSON only when the content type says JSON', () => {
    const payload = Buffer.from('{"t":"\\ud83d"}');
    expect(checkEnvelopeText(valid({ payload }), true)?.details).toMatchObject({ field: 'payload' });
    expect(checkEnvelopeText(valid({ payload, content_type: 'application/octet-stream' }), false)).toBeUndefined();
  });

  it('an HTTP body: a JSON payload with a lone surrogate is refused; a text payload before it becomes UTF-8', () => {
    const json = envelopeFromJson({ capability: 'summarize', payload: { t: LONE_HIGH } }, { producer: 'agent-p', now: NOW });
    expect(validateEnvelope(json, { maxPayloadBytes: 1024 }, NOW)?.details).toMatchObject({ field: 'payload' });
    expect(() =>
      envelopeFromJson({ capability: 'summarize', content_type: 'text/plain', payload: `a${LONE_HIGH}` }, { producer: 'agent-p', now: NOW }),
    ).toThrow(/payload holds a lone UTF-16 surrogate/);
    const text = envelopeFromJson({ capability: 'summarize', content_type: 'text/plain', payload: 'a\u0000b' }, { producer: 'agent-p', now: NOW });
    expect(text.payload).toEqual(Buffer.from('a\u0000b'));
  });
});

describe('checkResult', () => {
  const LIMIT = 256 * 1024;

  it('counts a binary result by its bytes, not its base64 text', () => {
    const atLimit = Buffer.alloc(LIMIT, 7).toString('base64'); // 349,528 characters
    expect(checkResult({ payload_b64: atLimit }, LIMIT)).toBeUndefined();
    const over = checkResult({ payload_b64: Buffer.alloc(LIMIT + 1, 7).toString('base64') }, LIMIT);
    expect(over?.code).toBe(4102);
    expect(over?.details).toMatchObject({ bytes: LIMIT + 1, limit: LIMIT });
  });

  it('counts a JSON result by its JSON text in UTF-8', () => {
    const s = 'é'.repeat(LIMIT / 2 - 1); // 2 bytes each, plus the two quotes
    expect(checkResult({ payload: s }, LIMIT)).toBeUndefined();
    expect(checkResult({ payload: `${s}é` }, LIMIT)?.code).toBe(4102);
    expect(checkResult({ payload: undefined }, LIMIT)).toBeUndefined();
  });

  it('refuses lone surrogates in the payload, headers and content_type; keeps NUL', () => {
    expect(checkResult({ payload: { 'k\u0000': 'a\u0000b' } }, LIMIT)).toBeUndefined();
    expect(checkResult({ payload: { t: LONE_HIGH } }, LIMIT)?.details).toMatchObject({ field: 'payload' });
    expect(checkResult({ payload: 1, headers: { 'reach-context-a': `x${LONE_LOW}` } }, LIMIT)?.code).toBe(4101);
    expect(checkResult({ payload_b64: 'AA==', content_type: `x${LONE_HIGH}` }, LIMIT)?.details).toMatchObject({ field: 'content_type' });
  });
});

describe('toStorableText and storableEnvelopeJson', () => {
  it('replaces lone surrogates and NUL with U+FFFD, keeps pairs', () => {
    expect(toStorableText(`a${LONE_HIGH}b\u0000c${PAIR}`)).toBe(`a\ufffdb\ufffdc${PAIR}`);
    expect(toStorableText('plain')).toBe('plain');
  });

  it('keeps a payload jsonb cannot hold as payload_b64, byte for byte; an ordinary one as JSON', () => {
    const nul = valid({ payload: Buffer.from('{"t":"a\\u0000b"}'), request_id: 'r\u0000' });
    const json = storableEnvelopeJson(nul);
    expect(json.payload).toBeUndefined();
    expect(Buffer.from(json.payload_b64 as string, 'base64')).toEqual(nul.payload);
    expect(json.request_id).toBe('r\ufffd');
    expect(JSON.stringify(json)).not.toMatch(/\\u0000|\\ud8/i);
    const lone = storableEnvelopeJson(valid({ payload: Buffer.from('{"t":"\\ud83d"}') }));
    expect(Buffer.from(lone.payload_b64 as string, 'base64').toString()).toBe('{"t":"\\ud83d"}');
    expect(storableEnvelopeJson(valid({ payload: Buffer.from('{"t":1}') })).payload).toEqual({ t: 1 });
  });
});

describe('maxRecordBytes', () => {
  it('leaves room for a payload at the limit written as base64 (a binary result in a status event)', () => {
    const limit = 256 * 1024;
    expect(maxRecordBytes(limit)).toBeGreaterThanOrEqual(Buffer.alloc(limit).toString('base64').length + 64 * 1024);
  });
});
