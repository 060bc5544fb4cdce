import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Consumer, Kafka } from 'kafkajs';
import { silentLogger } from '@reach/core';
import { CRASHED_MEMBER_LEAVE_MS, leaveForCrashedMember } from '@reach/kafka';

// The wiring of leaveForCrashedMember: which member id it leaves for, and when. The LeaveGroup
// itself goes through kafkajs's cluster connection, stood in for here by one that records the
// requests (the real one is exercised by test/integration/kafka/group-recovery.test.ts and the
// SASL test of zz-cluster).
function fakes(coordinatorBackAt = 0) {
  const left: Array<{ groupId: string; memberId: string }> = [];
  const cluster = {
    connect: async () => undefined,
    disconnect: async () => undefined,
    findGroupCoordinator: async () => {
      // a broker restarting: no coordinator (retriable) until coordinatorBackAt
      if (Date.now() < coordinatorBackAt) throw Object.assign(new Error('The coordinator is loading'), { type: 'GROUP_LOAD_IN_PROGRESS', retriable: true });
      return { leaveGroup: async (req: { groupId: string; memberId: string }) => void left.push(req) };
    },
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
  afterEach(() => {
    vi.useRealTimers();
  });

  it('keeps trying while the broker restarts, and leaves once the coordinator is back (12 s later)', async () => {
    vi.useFakeTimers();
    const f = fakes(Date.now() + 12_000);
    leaveForCrashedMember(f.consumer, f.kafka, 'g', silentLogger);
    f.join('m-1');
    f.crash(true);
    await vi.advanceTimersByTimeAsync(11_000);
    expect(f.left).toEqual([]);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(f.left).toEqual([{ groupId: 'g', memberId: 'm-1' }]);
    expect(CRASHED_MEMBER_LEAVE_MS).toBeGreaterThan(12_000);
  });

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
