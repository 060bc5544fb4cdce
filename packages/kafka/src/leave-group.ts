import type { Kafka } from 'kafkajs';

/**
 * LeaveGroup on behalf of a consumer-group member that died without leaving (kill -9).
 *
 * kafkajs has no static membership, so the coordinator keeps a dead member, and its partitions,
 * until the member's session times out (6 s), and a restarted process joins under a new member
 * id that the rebalance makes wait for the old one. Whoever saw the process die (the supervisor,
 * or the process itself when it starts again) knows the member ids it had (see MemberLedger) and
 * removes them at once: the survivors rebalance at their next heartbeat.
 *
 * kafkajs's public API leaves only for its own consumer, but its cluster connection (brokers,
 * TLS, SASL, retries: the client's own settings) can find a group's coordinator and send
 * LeaveGroup for any member id. That connection is reached through the client's private
 * createCluster (kafkajs 2.2.4, pinned and patched in patches/); should an upgrade move it,
 * this throws at once and test/integration/kafka/group-recovery.test.ts fails.
 */
export interface GroupMember {
  groupId: string;
  memberId: string;
}

interface Coordinator {
  leaveGroup(req: { groupId: string; memberId: string }): Promise<unknown>;
}

interface Cluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  findGroupCoordinator(req: { groupId: string }): Promise<Coordinator>;
}

const CREATE_CLUSTER = 'private:Kafka:createCluster';

function clusterOf(kafka: Kafka): Cluster {
  const key = Object.getOwnPropertySymbols(kafka).find((s) => s.description === CREATE_CLUSTER);
  const create = key === undefined ? undefined : (kafka as unknown as Record<symbol, unknown>)[key];
  if (typeof create !== 'function') throw new Error(`kafkajs has no ${CREATE_CLUSTER} any more (upgraded?): leave-group.ts must follow it`);
  return (create as (o: Record<string, unknown>) => Cluster)({ allowAutoTopicCreation: false, maxInFlightRequests: 1 });
}

/** kafkajs error types meaning the member is already gone (it left, or its session ran out): what we wanted. */
const GONE = new Set(['UNKNOWN_MEMBER_ID']);

/** Rejects after `ms` (the cluster's own retries run far longer while a broker is away). */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Removes the given members from their groups. Members already gone count as removed. Gives up
 * after `deadlineMs` (a broker restarting, a coordinator moving) and throws, so a caller can log
 * it: takeover then waits out the session instead.
 */
export async function leaveGroupMembers(kafka: Kafka, members: readonly GroupMember[], opts: { deadlineMs?: number } = {}): Promise<void> {
  if (members.length === 0) return;
  const deadlineMs = opts.deadlineMs ?? 5_000;
  const cluster = clusterOf(kafka);
  let over = false;
  const leaveOne = async (m: GroupMember) => {
    for (let attempt = 0; ; attempt++) {
      try {
        const coordinator = await cluster.findGroupCoordinator({ groupId: m.groupId });
        await coordinator.leaveGroup({ groupId: m.groupId, memberId: m.memberId });
        return;
      } catch (err) {
        const e = err as { type?: string; retriable?: boolean };
        if (GONE.has(e.type ?? '')) return;
        // the coordinator moving or loading (a broker restart): ask again where it is
        if (!e.retriable || over) throw err;
        await new Promise((r) => setTimeout(r, Math.min(500, 50 * 2 ** attempt)));
      }
    }
  };
  try {
    await within(
      (async () => {
        await cluster.connect();
        for (const m of members) await leaveOne(m);
      })(),
      deadlineMs,
      `LeaveGroup for ${members.length} member(s)`,
    );
  } finally {
    over = true;
    await cluster.disconnect().catch(() => undefined);
  }
}
