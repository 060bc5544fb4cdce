import { describe, expect, it } from 'vitest';
import { ReachError } from '@reach/core';
import type { DeadLetter } from '@reach/envelope';
import type { InRecord } from '@reach/kafka';
import { deadLetterRecord } from '@reach/service-kit';
import { makeCodec } from '../envelope/fake-registry.js';
import { envelopeOf } from '../../helpers/envelope.js';

const TP = `00-${'c'.repeat(32)}-${'d'.repeat(16)}-01`;

function consumed(headers: Record<string, string>): InRecord {
  return { topic: 'reach.pending.v1', partition: 2, offset: '7', key: Buffer.from('k'), value: Buffer.from('x'), headers, timestamp: '0' };
}

describe('deadLetterRecord', () => {
  it('carries the failed record’s traceparent as a header (a stage re-points it to its span) and never its token', async () => {
    const { codec } = await makeCodec();
    const out = deadLetterRecord(codec, {
      service: 'router',
      error: new ReachError('NO_ROUTE', 'nobody'),
      record: consumed({ traceparent: TP, 'reach-token': 'secret' }),
      envelope: envelopeOf(),
    });
    expect(out.topic).toBe('reach.dlq.v1');
    expect(out.headers).toMatchObject({ traceparent: TP, 'reach-code': '2001', 'reach-reason': 'NO_ROUTE' });
    const dl = await codec.decode<DeadLetter>('reach.dlq.v1-value', out.value);
    expect(dl.raw_headers).toEqual({ traceparent: TP });
  });

  it('has no traceparent header when the failed record had none (or there was no record)', async () => {
    const { codec } = await makeCodec();
    const error = new ReachError('NO_ROUTE', 'nobody');
    expect(deadLetterRecord(codec, { service: 'router', error, record: consumed({}), envelope: envelopeOf() }).headers).not.toHaveProperty('traceparent');
    expect(deadLetterRecord(codec, { service: 'ingress', error, envelope: envelopeOf() }).headers).not.toHaveProperty('traceparent');
  });
});
