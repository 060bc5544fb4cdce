import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { Consumer, Kafka } from 'kafkajs';
import { silentLogger } from '@reach/core';
import { leaveForCrashedMember } from '@reach/kafka';

// The wiring of leaveForCrashedMember: which member id it leaves for, and when. The LeaveGroup
// itself goes through kafkajs's cluster connection, stood in for here by one that records the
// requests (the real one is exercised by test/integration/kafka/group-recovery.test.ts and the
// SASL test of zz-cluster).
function fakes() {
  const left: Array<{ groupId: string; memberId: string }> = [];
  const cluster = {
    connect: async () => undefined,
    disconnect: async () => undefined,
    findGroupCoordinator: async () => ({ leaveGroup: async (req: { groupId: string; memberId: string }) => void left.push(req) }),
  };
  const kafka = { [Symbol('private:Kafka:createCluster')]: () => cluster } as unknown as Kafka;
  const emitter = new EventEmitter();
  const consumer = {
    events: { GROUP_JOIN: 'consumer.group_join', CRASH: 'consumer.crash' },
    on: (event: string, fn: (e: unknown) => void) => emitter.on(event, fn),
  } as unknown as Consumer;
  const join = (memberId: string) => emitter.emit('consumer.group_join', { payload: { groupId: 'g', memberId } });
  const crash = (restart: boolean) => emitter.emit('consumer.crash', { payload: { error: new Error('x'), restart } });
  return { left, kafka, consumer, join, crash };
}

const settle = () => new Promise((r) => setTimeout(r, 10));

describe('leaveForCrashedMember', () => {
  it('leaves for the member id of the last join when kafkajs restarts the crashed consumer, once', async () => {
    const f = fakes();
    leaveForCrashedMember(f.consumer, f.kafka, 'g', silentLogger);
    f.join('m-1');
    f.join('m-2');
    f.crash(true);
    f.crash(true); // no join since: nothing more to leave for
    await settle();
    expect(f.left).toEqual([{ groupId: 'g', memberId: 'm-2' }]);
  });

  it('does nothing for a crash kafkajs does not restart (the process exits) or before any join', async () => {
    const f = fakes();
    leaveForCrashedMember(f.consumer, f.kafka, 'g', silentLogger);
    f.crash(true);
    f.join('m-1');
    f.crash(false);
    await settle();
    expect(f.left).toEqual([]);
  });
});
