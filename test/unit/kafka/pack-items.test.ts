import { describe, expect, it } from 'vitest';
import type { StatusBatch, StatusEvent } from '@reach/envelope';
import { packItems, splitBySize, type OutRecord } from '@reach/kafka';
import { statusRecord } from '@reach/service-kit';
import { envelopeOf } from '../../helpers/envelope.js';
import { makeCodec } from '../envelope/fake-registry.js';

// Status events are packed into StatusBatch records by byte copying (no re-encode): the packed
// record must decode, with the real Avro schema, to exactly the events that went in, in order.
const { codec } = await makeCodec();
const BATCHES = 'reach.status-batches.v1';

function events(n: number, tag = 'm'): OutRecord[] {
  return Array.from({ length: n }, (_, i) =>
    statusRecord(codec, {
      state: i % 2 === 0 ? 'ROUTED' : 'DELIVERED',
      envelope: envelopeOf({ message_id: `msg_${tag}${i}` }),
      service: 'router',
      instance: 'router-1',
      agentId: `agent-${i}`,
      detail: { candidates: [{ agent_id: `agent-${i}`, score: i / 10 }] },
    }),
  );
}

async function unpacked(r: OutRecord): Promise<StatusEvent[]> {
  return (await codec.decode<StatusBatch>('reach.status-batches.v1-value', r.value)).events;
}

describe('packItems (status events packed per produce request)', () => {
  it('packs the events of one request into one StatusBatch record that decodes to the same events, in order', async () => {
    const items = events(300);
    const singles = await Promise.all(items.map((r) => codec.decode<StatusEvent>('reach.status.v1-value', r.value)));
    const packed = packItems(items);
    expect(packed).toHaveLength(1);
    expect(packed[0]!.topic).toBe(BATCHES);
    expect(packed[0]!.key).toBe('msg_m0');
    expect(packed[0]!.packInto).toBeUndefined();
    expect(await unpacked(packed[0]!)).toEqual(singles);
  });

  it('passes records that are not items through unchanged, ahead of the packs', () => {
    const plain: OutRecord = { topic: 'reach.routed.v1', key: 'agent-1', value: Buffer.from('x') };
    const packed = packItems([plain, ...events(3), plain]);
    expect(packed.slice(0, 2)).toEqual([plain, plain]);
    expect(packed).toHaveLength(3);
  });

  it('cuts packs at the size limit; every event lands in exactly one pack', async () => {
    const items = events(500);
    const limit = 20 * 1024;
    const packed = packItems(items, limit);
    expect(packed.length).toBeGreaterThan(1);
    for (const p of packed) expect(p.value!.length).toBeLessThanOrEqual(limit + 16);
    const ids = (await Promise.all(packed.map(unpacked))).flat().map((e) => e.message_id);
    expect(ids).toEqual(items.map((r) => r.key));
    // the request splitter still sees records under its own limit
    expect(splitBySize(packed).flat()).toHaveLength(packed.length);
  });

  it('encodes item counts past one varint byte (64+ events) correctly', async () => {
    for (const n of [1, 63, 64, 65, 700]) expect(await unpacked(packItems(events(n), Number.POSITIVE_INFINITY)[0]!)).toHaveLength(n);
  });
});
