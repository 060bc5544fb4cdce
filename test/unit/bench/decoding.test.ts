import { describe, expect, it } from 'vitest';
import { readVarint, varintLength, writeVarint } from '../../../packages/bench/src/avro-varint.js';
import { ackFrame, peekDeliver } from '../../../packages/bench/src/fast-decode.js';

describe('the bench reads what it needs without a full decode', () => {
  it('zig-zag varints round-trip, millisecond timestamps included', () => {
    for (const n of [0, 1, -1, 63, 64, -65, 2 ** 31, Date.UTC(2030, 0, 1), -(2 ** 40)]) {
      const buf = Buffer.alloc(10);
      const end = writeVarint(buf, 0, n);
      expect(end).toBe(varintLength(n));
      expect(readVarint(buf, 0)).toEqual({ value: n, next: end });
    }
    expect(readVarint(Buffer.from([0x80]), 0)).toBeUndefined();
  });

  it('peeks seq and message id of a deliver frame laid out as the dispatcher writes it', () => {
    const frame = JSON.stringify({
      type: 'deliver',
      seq: 4711,
      attempt: 0,
      deadline: '2026-01-01T00:00:00.000Z',
      message: { message_id: 'msg_01J0000000000000000000000', payload: { message_id: 'not this one' } },
    });
    expect(peekDeliver(frame)).toEqual({ seq: 4711, messageId: 'msg_01J0000000000000000000000' });
    expect(peekDeliver(JSON.stringify({ seq: 1, type: 'deliver' }))).toBeUndefined();
    expect(peekDeliver('{"type":"ping","ts":1}')).toBeUndefined();
    expect(JSON.parse(ackFrame(3, 'msg_x'))).toEqual({ type: 'ack', seq: 3, message_id: 'msg_x' });
  });
});
