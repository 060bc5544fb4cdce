import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

// patches/kafkajs@2.2.4.patch, src/consumer/runner.js: a consumer told UNKNOWN_MEMBER_ID rejoins
// under the member id it had. After a broker restart the group coordinator, still loading its
// partition, answered a heartbeat with UNKNOWN_MEMBER_ID and then loaded the group with that very
// member; unpatched, kafkajs joined under a new id and the coordinator waited the whole rebalance
// timeout (10 s) for the old one: the dispatcher consumed nothing for 10 s (chaos run, 5 December,
// `Group reach-dispatcher removed dynamic members who haven't joined` exactly 10 s after the join).
const require = createRequire(import.meta.url);
const kafkajsRoot = require.resolve('kafkajs').replace(/index\.js$/, '');
const Runner = require(`${kafkajsRoot}src/consumer/runner.js`) as new (opts: unknown) => {
  running: boolean;
  fetchManager: { start: () => Promise<void> };
  scheduleFetchManager: () => void;
};
const ConsumerGroup = require(`${kafkajsRoot}src/consumer/consumerGroup.js`) as new (opts: unknown) => {
  memberId: string | null;
  joinAndSync: () => Promise<void>;
};
const { createErrorFromCode } = require(`${kafkajsRoot}src/protocol/error.js`) as { createErrorFromCode: (code: number) => Error };
const UNKNOWN_MEMBER_ID = 25;
const GROUP_LOAD_IN_PROGRESS = 14;
const GROUP_COORDINATOR_NOT_AVAILABLE = 15;

interface Log {
  namespace: () => Log;
  debug: () => void;
  info: () => void;
  warn: () => void;
  error: () => void;
}
const logger: Log = { namespace: () => logger, debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

describe('kafkajs consumer told UNKNOWN_MEMBER_ID (patched)', () => {
  it('rejoins under the member id it had, so a coordinator that still knows it completes the rebalance at once', async () => {
    const joinedAs: Array<string | null> = [];
    const consumerGroup = {
      groupId: 'reach-dispatcher',
      memberId: 'dispatcher-1-old' as string | null,
      getNodeIds: () => [],
      joinAndSync: async () => {
        joinedAs.push(consumerGroup.memberId);
      },
    };
    const runner = new Runner({
      logger,
      consumerGroup,
      instrumentationEmitter: { emit: () => {} },
      onCrash: () => {},
      retry: { retries: 2, initialRetryTime: 1 },
    });
    let starts = 0;
    runner.running = true;
    runner.fetchManager = {
      start: async () => {
        starts += 1;
        if (starts === 1) throw createErrorFromCode(UNKNOWN_MEMBER_ID);
        runner.running = false; // the second round: stop the loop
      },
    };
    runner.scheduleFetchManager();
    await new Promise((r) => setTimeout(r, 50));
    expect(joinedAs).toEqual(['dispatcher-1-old']);
    expect(starts).toBe(2);
  });
});

// src/consumer/consumerGroup.js: a join answered "the coordinator is loading" (or "not available")
// right after a broker restart is retried under the same member id. Unpatched, the join bailed,
// the consumer crashed and kafkajs restarted it under a new member id, and the coordinator held
// the rebalance for the old id until its 6 s session ran out (the router idle for 6 s,
// `Member … has failed, removing it from the group`, chaos run of 5 December).
describe('kafkajs join while the coordinator loads (patched)', () => {
  for (const [name, code] of [
    ['GROUP_LOAD_IN_PROGRESS', GROUP_LOAD_IN_PROGRESS],
    ['GROUP_COORDINATOR_NOT_AVAILABLE', GROUP_COORDINATOR_NOT_AVAILABLE],
  ] as const) {
    it(`retries the join on ${name} under the same member id instead of crashing the consumer`, async () => {
      const group = new ConsumerGroup({ logger, groupId: 'reach-router', topics: [], retry: { retries: 3, initialRetryTime: 1 } });
      group.memberId = 'router-1-old';
      const joins: Array<string | null> = [];
      const symbols = Object.getOwnPropertySymbols(Object.getPrototypeOf(group));
      const join = symbols.find((s) => s.description === 'private:ConsumerGroup:join')!;
      const sync = symbols.find((s) => s.description === 'private:ConsumerGroup:sync')!;
      const own = group as unknown as Record<symbol, () => Promise<void>> & { assigned: () => unknown[]; instrumentationEmitter: unknown };
      own[join] = async () => {
        joins.push(group.memberId);
        if (joins.length === 1) throw createErrorFromCode(code);
      };
      own[sync] = async () => undefined;
      own.assigned = () => [];
      own.instrumentationEmitter = { emit: () => {} };
      await group.joinAndSync();
      expect(joins).toEqual(['router-1-old', 'router-1-old']);
    });
  }
});
