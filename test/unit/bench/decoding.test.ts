import { describe, expect, it } from 'vitest';
import { schemaDef, type StatusEvent } from '@reach/envelope';
import { readVarint, varintLength, writeVarint } from '../../../packages/bench/src/avro-varint.js';
import { ackFrame, peekDeliver, peekStatus } from '../../../packages/bench/src/fast-decode.js';

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

  it('peeks the head of a framed StatusEvent written with the expected schema id, and nothing else', () => {
    const event: StatusEvent = {
      event_id: 'evt_01J0000000000000000000000',
      message_id: 'msg_01J0000000000000000000000',
      state: 'DELIVERED',
      attempt: 2,
      at: Date.UTC(2026, 4, 1, 12, 0, 0, 123),
      service: 'dispatcher',
      instance: 'd-1',
      trace_id: null,
      producer: null,
      message_type: null,
      capability: null,
      topic: null,
      target_agent_id: null,
      agent_id: 'a',
      parent_message_id: null,
      code: null,
      reason: null,
      detail_json: '{"x":"ü"}',
      created_at: null,
      expire_at: null,
      idempotency_key: null,
      session_id: null,
      correlation_id: null,
      request_id: null,
      reply_to: null,
      priority: null,
    };
    const body = schemaDef('reach.v1.StatusEvent').type.toBuffer(event);
    const framed = Buffer.concat([Buffer.from([0, 0, 0, 0, 7]), body]);
    expect(peekStatus(framed, 7)).toEqual({ eventId: event.event_id, messageId: event.message_id, state: 'DELIVERED', attempt: 2, at: event.at });
    expect(peekStatus(framed, 8)).toBeUndefined();
    expect(peekStatus(framed.subarray(0, 20), 7)).toBeUndefined();
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
