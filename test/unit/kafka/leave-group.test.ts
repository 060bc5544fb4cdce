import { describe, expect, it } from 'vitest';
import { decodeApiVersions, decodeLeaveGroup, encodeLeaveGroup, frameRequest, pickVersion, RequestWriter } from '@reach/kafka';

// The three Kafka requests leave-group.ts speaks itself (kafkajs cannot leave for another
// member). Checked byte for byte against the protocol's field order; the integration test
// (group-recovery) runs them against the real broker.
describe('LeaveGroup wire format', () => {
  it('frames a request: size, api key, version, correlation id, client id, body', () => {
    const framed = frameRequest(13, 3, 7, 'c', Buffer.from([0xaa]));
    expect([...framed]).toEqual([0, 0, 0, 12, 0, 13, 0, 3, 0, 0, 0, 7, 0, 1, 0x63, 0xaa]);
  });

  it('encodes one member before v3 and a member array (no group instance id) from v3', () => {
    expect([...encodeLeaveGroup(1, 'g', ['m'])]).toEqual([0, 1, 0x67, 0, 1, 0x6d]);
    expect([...encodeLeaveGroup(3, 'g', ['m', 'n'])]).toEqual([0, 1, 0x67, 0, 0, 0, 2, 0, 1, 0x6d, 0xff, 0xff, 0, 1, 0x6e, 0xff, 0xff]);
  });

  it('reads the error of a v1 answer, and a member error of a v3 answer', () => {
    expect(decodeLeaveGroup(1, new RequestWriter().int32(0).int16(25).bytes())).toBe(25);
    const v3 = new RequestWriter().int32(0).int16(0).int32(2).string('m').string(null).int16(0).string('n').string(null).int16(16).bytes();
    expect(decodeLeaveGroup(3, v3)).toBe(16);
  });

  it('picks the highest version both sides speak, and refuses when there is none', () => {
    const apis = decodeApiVersions(new RequestWriter().int16(0).int32(2).int16(13).int16(0).int16(5).int16(10).int16(0).int16(6).bytes());
    expect(pickVersion(apis.get(13), 1, 3, 'LeaveGroup')).toBe(3);
    expect(pickVersion({ min: 0, max: 2 }, 1, 3, 'LeaveGroup')).toBe(2);
    expect(() => pickVersion({ min: 4, max: 5 }, 1, 3, 'LeaveGroup')).toThrow(/no LeaveGroup version/);
    expect(() => pickVersion(undefined, 1, 2, 'FindCoordinator')).toThrow(/no FindCoordinator version/);
  });
});
