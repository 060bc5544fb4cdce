import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { ConfigResourceTypes, Kafka, Partitioners, logLevel, type Admin } from 'kafkajs';
import { TOPICS } from '@reach/kafka';
import { startTestAgent, stopTestAgents, uniqueName } from '@reach/sdk/testing';
import { reachCli } from '../../helpers/cli.js';
import { eventually } from '../../helpers/wait.js';
import { saveFigures, startSecondStack, type SecondStack } from './second-stack.js';

// `reach up --brokers 3` (a second stack on its own ports and REACH_HOME, next to the default
// stack): three KRaft broker+controller nodes, every topic (internal ones included) with three
// replicas, min.insync.replicas 2 and no unclean leader election; then the broker leading
// reach.pending.v1 partition 0 is killed with SIGKILL while a producer submits messages at a
// steady rate over the HTTP API, and the supervisor restarts it. Every accepted message must end
// DELIVERED. The figures (failover time, latencies, refusals, duplicates) go to
// test-artifacts/cluster/broker-failover.json.
const RATE = 20; // messages per second
const DURATION_MS = 30_000;
const KILL_AT_MS = 8_000;
const PARTITIONS = 6; // REACH_TOPIC_PARTITIONS' default, which this stack uses

let s: SecondStack;
let kafka: Kafka;
let admin: Admin;
let keep = false;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  s = await startSecondStack({ name: 'failover', portBase: 17000, brokers: 3 });
  kafka = new Kafka({
    clientId: 'cluster-test',
    brokers: s.brokers,
    logLevel: logLevel.NOTHING,
    retry: { retries: 3, initialRetryTime: 100, maxRetryTime: 500 },
  });
  admin = kafka.admin();
  await admin.connect();
}, 300_000);

afterAll(async () => {
  await stopTestAgents();
  await admin?.disconnect().catch(() => undefined);
  if (s) {
    const res = await s.down(keep);
    expect(res.code, res.stderr).toBe(0);
  }
}, 200_000);

function percentile(values: readonly number[], q: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** Partition of a keyed record, as kafkajs's (murmur2, Java-compatible) default partitioner picks it. */
const partitioner = Partitioners.DefaultPartitioner();
const partitionMetadata = Array.from({ length: PARTITIONS }, (_, i) => ({ partitionId: i, leader: 1, replicas: [], isr: [], partitionErrorCode: 0 }));
const partitionOf = (key: string) => partitioner({ topic: TOPICS.pending.name, partitionMetadata, message: { key, value: null } });

async function leaderOf(topic: string, partition: number): Promise<number> {
  const meta = await admin.fetchTopicMetadata({ topics: [topic] });
  return meta.topics[0]!.partitions.find((p) => p.partitionId === partition)!.leader;
}

/** Every partition of every topic in `topics` has all 3 replicas in sync. */
async function fullyInSync(topics: readonly string[]): Promise<boolean> {
  const meta = await admin.fetchTopicMetadata({ topics: [...topics] });
  return meta.topics.every((t) => t.partitions.every((p) => p.replicas.length === 3 && p.isr.length === 3));
}

/**
 * Where lost messages are (diagnostics for a failure): each id's partition and offset in
 * reach.pending.v1, if there at all, and the router group's committed offsets.
 */
async function locatePending(ids: readonly string[]): Promise<Record<string, unknown>> {
  const wanted = new Set(ids);
  const found: Record<string, string> = {};
  const ends = await admin.fetchTopicOffsets(TOPICS.pending.name);
  const consumer = kafka.consumer({ groupId: uniqueName('cluster-test-scan'), maxWaitTimeInMs: 200 });
  await consumer.connect();
  const left = new Map(ends.filter((e) => e.high !== '0').map((e) => [e.partition, BigInt(e.high)]));
  try {
    await consumer.subscribe({ topic: TOPICS.pending.name, fromBeginning: true });
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 30_000);
      void consumer.run({
        eachMessage: async ({ partition, message }) => {
          const key = message.key?.toString() ?? '';
          if (wanted.has(key)) found[key] = `${partition}@${message.offset}`;
          if (BigInt(message.offset) + 1n >= (left.get(partition) ?? 0n)) left.delete(partition);
          if (left.size === 0) {
            clearTimeout(timer);
            resolve();
          }
        },
      });
    });
  } finally {
    await consumer.disconnect();
  }
  const committed = await admin.fetchOffsets({ groupId: 'reach-router', topics: [TOPICS.pending.name] }).catch((err: Error) => err.message);
  return { in_pending: found, pending_ends: ends.map((e) => `${e.partition}:${e.high}`), router_committed: committed };
}

const ALL_TOPICS = [...Object.values(TOPICS).map((t) => t.name), '__consumer_offsets', '_schemas'];

describe('reach up --brokers 3', () => {
  it('runs three KRaft nodes (heap ≤ 384 MiB each, own ports and log dirs) and replicates every topic 3 ways with min.insync.replicas 2 and unclean leader election off', async () => {
    onTestFailed(() => void (keep = true));
    expect(s.up.stderr).toMatch(/✔ topics: RF 3, min\.insync\.replicas 2, unclean leader election off/);
    const ps = await s.ps();
    expect(ps.ready).toBe(true);
    const nodes = ps.processes.filter((p) => /^kafka-\d+$/.test(p.name));
    expect(nodes.map((n) => n.name)).toEqual(['kafka-1', 'kafka-2', 'kafka-3']);
    expect(nodes.map((n) => n.endpoint)).toEqual(s.brokers);
    const logDirs = new Set<string>();
    for (const n of nodes) {
      const cmd = readFileSync(`/proc/${n.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
      expect(cmd, n.name).toContain('-Xmx384m');
      expect(cmd.at(-2)).toBe('kafka.Kafka');
      const config = readFileSync(cmd.at(-1)!, 'utf8');
      logDirs.add(/^log\.dirs=(.+)$/m.exec(config)![1]!);
      expect(config).toMatch(/^controller\.quorum\.voters=1@127\.0\.0\.1:\d+,2@127\.0\.0\.1:\d+,3@127\.0\.0\.1:\d+$/m);
    }
    expect(logDirs.size).toBe(3);
    for (const d of logDirs) expect(d.startsWith(s.home)).toBe(true);

    // Services are given all three brokers.
    const router = ps.processes.find((p) => p.name === 'router')!;
    const environ = readFileSync(`/proc/${router.pid}/environ`, 'utf8').split('\0');
    expect(environ).toContain(`REACH_KAFKA_BROKERS=${s.brokers.join(',')}`);

    const cluster = await admin.describeCluster();
    expect(cluster.brokers.map((b) => b.nodeId).sort()).toEqual([1, 2, 3]);

    // Every topic, internal ones included: 3 replicas, 3 in sync, min.insync.replicas 2, unclean off.
    await eventually('every replica in sync', () => fullyInSync(ALL_TOPICS), 30_000);
    const meta = await admin.fetchTopicMetadata({ topics: ALL_TOPICS });
    expect(meta.topics.map((t) => t.name).sort()).toEqual([...ALL_TOPICS].sort());
    for (const t of meta.topics) {
      expect(t.partitions.length, t.name).toBeGreaterThan(0);
      for (const p of t.partitions) {
        expect(p.replicas.length, `${t.name}-${p.partitionId}`).toBe(3);
        expect([...p.isr].sort(), `${t.name}-${p.partitionId}`).toEqual([...p.replicas].sort());
      }
    }
    const configs = await admin.describeConfigs({
      includeSynonyms: false,
      resources: ALL_TOPICS.map((name) => ({ type: ConfigResourceTypes.TOPIC, name, configNames: ['min.insync.replicas', 'unclean.leader.election.enable'] })),
    });
    for (const r of configs.resources) {
      const get = (n: string) => r.configEntries.find((e) => e.configName === n)?.configValue;
      expect(get('min.insync.replicas'), r.resourceName).toBe('2');
      expect(get('unclean.leader.election.enable'), r.resourceName).toBe('false');
    }

    // The deploy step refuses a replication that contradicts the existing topics.
    const setupEnv = {
      ...s.env,
      REACH_KAFKA_BROKERS: s.brokers.join(','),
      REACH_SCHEMA_REGISTRY_URL: `http://127.0.0.1:${Number(s.env.REACH_DEV_SCHEMA_REGISTRY_PORT)}`,
    };
    const again = await reachCli(['setup'], { ...setupEnv, REACH_TOPIC_REPLICATION_FACTOR: '3' }, 60_000);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toMatch(/✔ topics: RF 3, min\.insync\.replicas 2, unclean leader election off/);
    const contradicting = await reachCli(['setup'], { ...setupEnv, REACH_TOPIC_REPLICATION_FACTOR: '1' }, 60_000);
    expect(contradicting.code).not.toBe(0);
    expect(contradicting.stderr).toMatch(/reach\.pending\.v1: replication factor 3 but 1 is asked/);
  });

  it('SIGKILL of the broker leading reach.pending.v1-0 under a steady producer: the supervisor restarts it and every accepted message is DELIVERED', async () => {
    onTestFailed(() => void (keep = true));
    const capability = uniqueName('failover').replace(/-/g, '_');
    const handled = new Map<string, number>();
    const receivedAt = new Map<string, number>();
    await startTestAgent({
      stack: s.sdk,
      descriptor: { metadata: { max_concurrency: 64 } },
      handlers: {
        [capability]: async (m) => {
          handled.set(m.message_id, (handled.get(m.message_id) ?? 0) + 1);
          if (!receivedAt.has(m.message_id)) receivedAt.set(m.message_id, Date.now());
          return { ok: true };
        },
      },
    });
    const token = s.adminToken();
    const ingress = s.url('ingress');

    interface Sent {
      sentAt: number;
      answeredAt?: number;
      status: number;
      id?: string;
      error?: string;
    }
    const sent: Sent[] = [];
    const send = async (n: number): Promise<void> => {
      const rec: Sent = { sentAt: Date.now(), status: 0 };
      sent.push(rec);
      try {
        const res = await fetch(`${ingress}/v1/messages`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ capability, message_type: 'task_request', payload: { n } }),
          signal: AbortSignal.timeout(90_000),
        });
        const body = await res.text();
        rec.status = res.status;
        rec.answeredAt = Date.now();
        if (res.status === 202) rec.id = (JSON.parse(body) as { message_id: string }).message_id;
        else rec.error = body.slice(0, 200);
      } catch (err) {
        rec.error = (err as Error).message;
      }
    };

    // The victim: the leader of reach.pending.v1 partition 0 when the kill is due.
    const ps = await s.ps();
    let victim = { id: -1, pid: -1 };
    let killedAt = 0;
    let failoverMs: number | null = null;
    let restartedMs: number | null = null;
    let inSyncMs: number | null = null;
    const watchers: Array<Promise<void>> = [];
    const kill = async () => {
      const id = await leaderOf(TOPICS.pending.name, 0);
      const proc = ps.processes.find((p) => p.name === `kafka-${id}`)!;
      victim = { id, pid: proc.pid };
      killedAt = Date.now();
      process.kill(proc.pid, 'SIGKILL');
      // A new leader for partition 0 (the controller fences the dead node after its session timeout).
      watchers.push(
        eventually(
          'a new leader of reach.pending.v1-0',
          async () => {
            const leader = await leaderOf(TOPICS.pending.name, 0);
            return leader >= 0 && leader !== id;
          },
          60_000,
          100,
        ).then(() => void (failoverMs = Date.now() - killedAt)),
      );
      // The supervisor's restart (a new pid whose port answers), then every replica back in sync.
      watchers.push(
        eventually(
          'the killed broker restarted',
          async () => {
            const now = (await s.ps()).processes.find((p) => p.name === `kafka-${id}`);
            return !!now && now.pid !== proc.pid && now.alive && now.ready;
          },
          90_000,
          200,
        ).then(async () => {
          restartedMs = Date.now() - killedAt;
          await eventually('every replica back in sync', () => fullyInSync(ALL_TOPICS), 90_000, 250);
          inSyncMs = Date.now() - killedAt;
        }),
      );
    };

    const started = Date.now();
    const sends: Array<Promise<void>> = [];
    let killing: Promise<void> | undefined;
    for (let n = 0; ; n++) {
      const due = started + (n * 1000) / RATE;
      if (due - started >= DURATION_MS) break;
      await sleep(Math.max(0, due - Date.now()));
      if (!killing && Date.now() - started >= KILL_AT_MS) killing = kill();
      sends.push(send(n));
    }
    await Promise.all(sends);
    await killing;
    await Promise.all(watchers);

    const accepted = sent.filter((r) => r.id);
    const ids = accepted.map((r) => r.id!);
    // Every accepted message ends DELIVERED in the read model (GET /v1/messages/{id} on the ingress).
    const states = new Map<string, string>();
    const statusOf = async (id: string) => {
      const res = await fetch(`${ingress}/v1/messages/${id}`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(10_000) });
      return res.ok ? ((await res.json()) as { status: string; attempt?: number }) : undefined;
    };
    const attempts = new Map<string, number>();
    try {
      await eventually(
        `${ids.length} accepted messages DELIVERED`,
        async () => {
          const open = ids.filter((id) => states.get(id) !== 'DELIVERED');
          for (let i = 0; i < open.length; i += 16) {
            await Promise.all(
              open.slice(i, i + 16).map(async (id) => {
                const st = await statusOf(id).catch(() => undefined);
                states.set(id, st?.status ?? 'unknown');
                if (st?.attempt !== undefined) attempts.set(id, st.attempt);
              }),
            );
          }
          return ids.every((id) => states.get(id) === 'DELIVERED');
        },
        90_000,
        500,
      );
    } finally {
      const latencies = (filter: (r: Sent) => boolean) =>
        accepted.filter((r) => filter(r) && receivedAt.has(r.id!)).map((r) => receivedAt.get(r.id!)! - r.sentAt);
      const afterKill = (r: Sent) => r.sentAt >= killedAt;
      const p0 = (r: Sent) => partitionOf(r.id!) === 0;
      const firstP0After = accepted
        .filter((r) => afterKill(r) && p0(r) && receivedAt.has(r.id!))
        .map((r) => receivedAt.get(r.id!)! - killedAt)
        .sort((a, b) => a - b)[0];
      const lost = ids.filter((id) => states.get(id) !== 'DELIVERED');
      const diagnosis = lost.length > 0 ? await locatePending(lost).catch((err: Error) => ({ error: err.message })) : undefined;
      saveFigures('broker-failover', {
        ...(diagnosis ? { diagnosis } : {}),
        rate_per_s: RATE,
        duration_s: DURATION_MS / 1000,
        killed_broker: victim.id,
        sent: sent.length,
        accepted: accepted.length,
        refused: Object.fromEntries(
          [...new Set(sent.filter((r) => !r.id).map((r) => r.status))].map((st) => [st, sent.filter((r) => !r.id && r.status === st).length]),
        ),
        refusal_samples: sent
          .filter((r) => !r.id)
          .slice(0, 3)
          .map((r) => r.error),
        lost: lost.length,
        lost_states: Object.fromEntries(lost.slice(0, 10).map((id) => [id, states.get(id)])),
        handler_duplicates: [...handled.values()].filter((c) => c > 1).length,
        redelivered_attempts: [...attempts.values()].filter((a) => a > 1).length,
        new_leader_after_ms: failoverMs,
        broker_restarted_after_ms: restartedMs,
        all_replicas_in_sync_after_ms: inSyncMs,
        pending0_first_delivery_after_kill_ms: firstP0After ?? null,
        http_answer_ms_max_after_kill: Math.max(0, ...sent.filter((r) => afterKill(r) && r.answeredAt).map((r) => r.answeredAt! - r.sentAt)),
        latency_ms_steady: {
          p50: percentile(
            latencies((r) => r.sentAt < killedAt - 3000),
            0.5,
          ),
          p99: percentile(
            latencies((r) => r.sentAt < killedAt - 3000),
            0.99,
          ),
        },
        latency_ms_after_kill: {
          p50: percentile(latencies(afterKill), 0.5),
          p99: percentile(latencies(afterKill), 0.99),
          max: percentile(latencies(afterKill), 1),
        },
        latency_ms_pending0_after_kill_max: percentile(
          latencies((r) => afterKill(r) && p0(r)),
          1,
        ),
      });
    }
    expect(accepted.length).toBeGreaterThan(0);
    expect(ids.filter((id) => states.get(id) !== 'DELIVERED')).toEqual([]);
    expect(failoverMs).not.toBeNull();
    expect(inSyncMs).not.toBeNull();
  });
});
