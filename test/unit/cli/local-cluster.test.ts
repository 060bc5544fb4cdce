import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  SERVICES,
  applyProperties,
  brokerConfig,
  internalReplication,
  kafkaClusterId,
  kafkaLayout,
  kafkaNodes,
  parseUpArgs,
  paths,
  crashLoop,
  restartDelayMs,
  STABLE_RUN_MS,
  serviceInstances,
} from '@reach/cli';
import { checkReplication, defaultMinInsyncReplicas, type TopicReplication } from '@reach/kafka';

// The pure parts of `reach up --brokers N --instances N`: port layout, generated broker
// configs, instance ports, restart backoff, option parsing and the deploy step's replication check.
const home = mkdtempSync(join(tmpdir(), 'reach-unit-cluster-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));
const props = (text: string) =>
  Object.fromEntries(
    text
      .split('\n')
      .filter((l) => /^[a-z]/.test(l))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );

describe('local Kafka layout', () => {
  it('keeps the single node on 9092/9093 and its historical data dir and config file', () => {
    const p = paths(home);
    const layout = kafkaLayout();
    expect(layout).toEqual({ brokers: 1, port: 9092, controllerPort: 9093 });
    const [node] = kafkaNodes(p, layout);
    expect(node).toMatchObject({ id: 1, name: 'kafka', address: '127.0.0.1:9092', controllerPort: 9093, dataDir: p.kafkaData, configFile: p.kafkaConfig });
    const cfg = props(brokerConfig(p, layout, node!, [node!]));
    expect(cfg).toMatchObject({
      'node.id': '1',
      'controller.quorum.voters': '1@127.0.0.1:9093',
      listeners: 'PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093',
      'offsets.topic.replication.factor': '1',
      'min.insync.replicas': '1',
      'log.dirs': p.kafkaData,
    });
  });

  it('lays out three nodes on consecutive broker and controller ports, with their own log dirs and a 3-voter quorum', () => {
    const p = paths(home);
    const layout = kafkaLayout({ brokers: 3, port: 19092 });
    expect(layout.controllerPort).toBe(19095);
    const nodes = kafkaNodes(p, layout);
    expect(nodes.map((n) => [n.name, n.port, n.controllerPort])).toEqual([
      ['kafka-1', 19092, 19095],
      ['kafka-2', 19093, 19096],
      ['kafka-3', 19094, 19097],
    ]);
    expect(new Set(nodes.map((n) => n.dataDir)).size).toBe(3);
    expect(new Set(nodes.map((n) => n.configFile)).size).toBe(3);
    for (const n of nodes) expect(n.dataDir.startsWith(home)).toBe(true);
    const cfg = props(brokerConfig(p, layout, nodes[1]!, nodes));
    expect(cfg).toMatchObject({
      'node.id': '2',
      'process.roles': 'broker,controller',
      'controller.quorum.voters': '1@127.0.0.1:19095,2@127.0.0.1:19096,3@127.0.0.1:19097',
      listeners: 'PLAINTEXT://127.0.0.1:19093,CONTROLLER://127.0.0.1:19096',
      'advertised.listeners': 'PLAINTEXT://127.0.0.1:19093',
      'offsets.topic.replication.factor': '3',
      'transaction.state.log.replication.factor': '3',
      'transaction.state.log.min.isr': '2',
      'share.coordinator.state.topic.replication.factor': '3',
      'default.replication.factor': '3',
      'min.insync.replicas': '2',
      'unclean.leader.election.enable': 'false',
      'log.dirs': nodes[1]!.dataDir,
    });
    expect(internalReplication(layout)).toEqual({ replicationFactor: 3, minInsyncReplicas: 2 });
  });

  it('refuses layouts that cannot work', () => {
    expect(() => kafkaLayout({ brokers: 0 })).toThrow(/--brokers/);
    expect(() => kafkaLayout({ brokers: 9 })).toThrow(/--brokers/);
    expect(() => kafkaLayout({ brokers: 3, port: 9092, controllerPort: 9093 })).toThrow(/overlap/);
    expect(() => kafkaLayout({ port: 70000 })).toThrow(/--kafka-port/);
  });

  it('applies overrides in place, keeps equal values untouched and appends new keys', () => {
    const out = applyProperties('# c\na=1\nb=2\n', { a: '1', b: '3', c: '4' }, 'added', 'changed');
    expect(out).toBe('# c\na=1\n# changed\nb=3\n\n# added\nc=4\n');
  });
});

describe('service instances', () => {
  it('gives instance i the documented port + 100·(i − 1), names it <service>-<i>, and never scales the console', () => {
    const router = SERVICES.find((s) => s.name === 'router')!;
    expect(serviceInstances(router, 7415, 3).map((i) => [i.name, i.port, i.portEnv])).toEqual([
      ['router', 7415, 'REACH_ROUTER_PORT'],
      ['router-2', 7515, 'REACH_ROUTER_PORT'],
      ['router-3', 7615, 'REACH_ROUTER_PORT'],
    ]);
    const console_ = SERVICES.find((s) => s.name === 'console')!;
    expect(serviceInstances(console_, 7420, 3).map((i) => i.name)).toEqual(['console']);
    expect(SERVICES.filter((s) => s.scalable).map((s) => s.name)).toEqual([
      'registry',
      'tracker',
      'dead-letter',
      'router',
      'retry-scheduler',
      'dispatcher',
      'ingress',
    ]);
    // With three instances no port of one service lands on another's.
    const ports = SERVICES.flatMap((s) =>
      serviceInstances(
        s,
        { registry: 7411, tracker: 7413, 'dead-letter': 7414, router: 7415, 'retry-scheduler': 7416, dispatcher: 7412, ingress: 7410, console: 7420 }[s.name],
        3,
      ).map((i) => i.port),
    );
    expect(new Set(ports).size).toBe(ports.length);
  });
});

describe('supervisor restarts', () => {
  it('restarts the first crash at once and backs off the following ones', () => {
    expect(restartDelayMs(true, 0)).toBe(100);
    expect([1, 2, 3, 4, 5, 6, 7].map((n) => restartDelayMs(true, n))).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000]);
    expect(restartDelayMs(false, 5)).toBe(200);
  });

  it('counts only a crash loop: a process that ran STABLE_RUN_MS before dying comes back at once', () => {
    const now = 1_000_000;
    const earlier = [now - 60_000, now - 20_000];
    expect(crashLoop(earlier, now, 5_000)).toEqual(earlier);
    expect(restartDelayMs(true, crashLoop(earlier, now, 5_000).length)).toBe(2000);
    expect(crashLoop(earlier, now, STABLE_RUN_MS)).toEqual([]);
    expect(restartDelayMs(true, crashLoop(earlier, now, STABLE_RUN_MS).length)).toBe(100);
    // crashes older than five minutes are forgotten even in a loop
    expect(crashLoop([now - 6 * 60_000, now - 1_000], now, 1_000)).toEqual([now - 1_000]);
  });
});

describe('reach up options', () => {
  it('parses --brokers, --instances and the Kafka ports', () => {
    expect(parseUpArgs(['--detach', '--brokers', '3', '--instances', '2', '--kafka-port', '19092'])).toEqual({
      detach: true,
      options: { brokers: 3, instances: 2, kafkaPort: 19092 },
    });
    expect(parseUpArgs([])).toEqual({ detach: false, options: {} });
    expect(() => parseUpArgs(['--brokers', 'three'])).toThrow(/--brokers must be a positive integer/);
    expect(() => parseUpArgs(['--replicas', '3'])).toThrow();
  });
});

describe('replication check of the deploy step', () => {
  const topic = (name: string, replicas: number[][], isr: number[][], minIsr = 2, unclean = false): TopicReplication => ({
    topic: name,
    partitions: replicas.map((r, i) => ({ partition: i, leader: r[0]!, replicas: r, isr: isr[i]! })),
    minInsyncReplicas: minIsr,
    uncleanLeaderElection: unclean,
  });
  const want = { replicationFactor: 3, minInsyncReplicas: 2 };

  it('derives min.insync.replicas from the replication factor', () => {
    expect([1, 2, 3, 4, 5].map(defaultMinInsyncReplicas)).toEqual([1, 1, 2, 2, 3]);
  });

  it('accepts fully replicated topics and reports under-replicated partitions that still have min.insync.replicas', () => {
    const report = checkReplication(
      [
        topic('a', [[1, 2, 3]], [[1, 2, 3]]),
        topic(
          'b',
          [
            [2, 3, 1],
            [3, 1, 2],
          ],
          [
            [2, 3, 1],
            [3, 1],
          ],
        ),
      ],
      want,
    );
    expect(report).toEqual({ topics: 2, partitions: 3, underReplicated: ['b-1'] });
  });

  it('fails naming every contradiction: an existing topic with another replication factor, min ISR, unclean election, too few in sync', () => {
    let message = '';
    try {
      checkReplication([topic('old', [[1]], [[1]], 1), topic('loose', [[1, 2, 3]], [[1, 2, 3]], 2, true), topic('behind', [[1, 2, 3]], [[1]])], want);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/old: replication factor 1 but 3 is asked/);
    expect(message).toMatch(/old: min\.insync\.replicas 1 but 2 is asked/);
    expect(message).toMatch(/loose: unclean\.leader\.election\.enable=true/);
    expect(message).toMatch(/behind-0: only 1 in-sync replica/);
    expect(message).toMatch(/does not change the replication factor of an existing topic/);
  });
});

describe('KRaft cluster id', () => {
  it('is 16 random bytes in base64url, and never starts with "-" (kafka-storage would read it as an option)', () => {
    // 0xf8 0x… encodes to "-…": the first draw is refused, the second taken.
    const draws = [Buffer.alloc(16, 0xf8), Buffer.alloc(16, 0x41)];
    const id = kafkaClusterId(() => draws.shift()!);
    expect(id).toBe(Buffer.alloc(16, 0x41).toString('base64url'));
    expect(draws).toHaveLength(0);
    for (let i = 0; i < 2_000; i++) {
      const drawn = kafkaClusterId();
      expect(drawn).toMatch(/^[A-Za-z0-9_][A-Za-z0-9_-]{21}$/);
    }
  });
});
