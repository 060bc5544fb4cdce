import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { defaultMinInsyncReplicas } from '@reach/kafka';
import { paths, defaultHome, type Paths } from '../paths.js';
import { classArchiveArgs, classArchivePath, ensureClassArchive, libsMarker } from './kafka-class-archive.js';

/**
 * The real Apache Kafka broker, fetched once from Maven Central by deploy/local/pom.xml into the
 * git-ignored cache and run from those jars as KRaft nodes, each a combined broker + controller:
 * one node by default (127.0.0.1:9092, controller 9093), or a cluster of N nodes with an N-voter
 * quorum (`reach up --brokers 3`), every node with its own ports, log dir and config file.
 */
export function kafkaVersion(p: Paths): string {
  const m = /<kafka\.version>([^<]+)<\/kafka\.version>/.exec(readFileSync(p.pom, 'utf8'));
  if (!m) throw new Error(`${p.pom} has no <kafka.version>`);
  return m[1]!;
}

function ownLibsDir(p: Paths): string {
  return join(p.kafkaCache, kafkaVersion(p), 'libs');
}

function pomHash(p: Paths): string {
  return createHash('sha256').update(readFileSync(p.pom)).digest('hex').slice(0, 16);
}

function complete(p: Paths, libs: string): boolean {
  const marker = join(libs, '.complete');
  return existsSync(marker) && readFileSync(marker, 'utf8').trim() === pomHash(p);
}

/**
 * Where the broker jars are: this state dir's cache, else (a REACH_HOME of its own, e.g. a test's
 * second stack) the default state dir's cache when it holds the same pinned jars — they never
 * change for a given pom, so sharing them saves a 55 MB download.
 */
export function libsDir(p: Paths): string {
  const own = ownLibsDir(p);
  if (complete(p, own)) return own;
  const shared = join(paths(defaultHome(), { create: false }).kafkaCache, kafkaVersion(p), 'libs');
  return complete(p, shared) ? shared : own;
}

export function kafkaFetched(p: Paths): boolean {
  return complete(p, libsDir(p));
}

function run(cmd: string, args: string[], logFile?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', (err) => reject(new Error(`${cmd} could not start (${err.message}); is it installed and on PATH?`)));
    child.on('exit', (code) => {
      if (logFile) writeFileSync(logFile, out);
      if (code === 0) resolve();
      else reject(new Error(`${cmd} ${args.slice(0, 3).join(' ')} … exited with ${code}:\n${out.split('\n').slice(-25).join('\n')}`));
    });
  });
}

/** Downloads the pinned broker and its dependencies (once; later runs reuse the cache). */
export async function fetchKafka(p: Paths): Promise<void> {
  if (kafkaFetched(p)) return;
  const libs = ownLibsDir(p);
  rmSync(libs, { recursive: true, force: true });
  mkdirSync(libs, { recursive: true });
  await run(
    'mvn',
    ['-B', '-q', '-f', p.pom, 'dependency:copy-dependencies', `-DoutputDirectory=${libs}`, '-DincludeScope=runtime'],
    join(p.logs, 'kafka-fetch.log'),
  );
  if (!readdirSync(libs).some((f) => f.startsWith('kafka_2.13-'))) throw new Error(`maven finished but ${libs} has no kafka_2.13 jar`);
  writeFileSync(join(libs, '.complete'), pomHash(p));
}

/** Largest local cluster `reach up --brokers` starts. */
export const MAX_LOCAL_BROKERS = 5;

/** How `reach up` lays out its local Kafka: how many nodes and their first ports. */
export interface KafkaLayout {
  /** Combined broker+controller nodes (1 … MAX_LOCAL_BROKERS). */
  brokers: number;
  /** Client port of node 1; node i listens on port + (i − 1). Default 9092. */
  port: number;
  /** Controller port of node 1; node i on controllerPort + (i − 1). Default: port + brokers (9093 for one node). */
  controllerPort: number;
}

export interface KafkaNode {
  /** node.id, 1 … brokers. */
  id: number;
  /** Process name in the supervisor and `reach ps`: `kafka` for a single node, `kafka-<id>` in a cluster. */
  name: string;
  host: string;
  port: number;
  controllerPort: number;
  address: string;
  dataDir: string;
  configFile: string;
}

export function kafkaLayout(opts: { brokers?: number; port?: number; controllerPort?: number } = {}): KafkaLayout {
  const brokers = opts.brokers ?? 1;
  if (!Number.isInteger(brokers) || brokers < 1 || brokers > MAX_LOCAL_BROKERS) throw new Error(`--brokers must be 1 … ${MAX_LOCAL_BROKERS} (got ${brokers})`);
  const port = opts.port ?? 9092;
  const controllerPort = opts.controllerPort ?? port + brokers;
  for (const [what, v] of [
    ['--kafka-port', port],
    ['--kafka-controller-port', controllerPort],
  ] as const) {
    if (!Number.isInteger(v) || v < 1 || v + brokers - 1 > 65535) throw new Error(`${what} must be a TCP port with room for ${brokers} node(s) (got ${v})`);
  }
  if (controllerPort < port + brokers && controllerPort + brokers > port) {
    throw new Error(`the controller ports ${controllerPort}…${controllerPort + brokers - 1} overlap the broker ports ${port}…${port + brokers - 1}`);
  }
  return { brokers, port, controllerPort };
}

/**
 * The nodes of a layout. A single node keeps the state dir's historical places (data/kafka,
 * kafka.properties); a cluster of N lives in data/kafka-cluster-N/node-<id>, so switching
 * between one and three brokers in the same state dir never mixes their logs.
 */
export function kafkaNodes(p: Paths, layout: KafkaLayout): KafkaNode[] {
  const host = '127.0.0.1';
  return Array.from({ length: layout.brokers }, (_, i) => {
    const id = i + 1;
    const single = layout.brokers === 1;
    const port = layout.port + i;
    return {
      id,
      name: single ? 'kafka' : `kafka-${id}`,
      host,
      port,
      controllerPort: layout.controllerPort + i,
      address: `${host}:${port}`,
      dataDir: single ? p.kafkaData : join(p.home, 'data', `kafka-cluster-${layout.brokers}`, `node-${id}`),
      configFile: single ? p.kafkaConfig : join(p.home, `kafka-${id}.properties`),
    };
  });
}

/** Replication of the internal topics (__consumer_offsets, transaction state, _schemas) and the topics' default. */
export function internalReplication(layout: KafkaLayout): { replicationFactor: number; minInsyncReplicas: number } {
  const replicationFactor = Math.min(layout.brokers, 3);
  return { replicationFactor, minInsyncReplicas: defaultMinInsyncReplicas(replicationFactor) };
}

/**
 * A KRaft cluster id: 16 random bytes, base64url without padding (what `kafka-storage
 * random-uuid` prints). Never one that starts with `-`: `kafka-storage format -t -abc…` reads it
 * as an option and fails ("expected one argument"), one `reach up` in 64 (Kafka's own
 * Uuid.randomUuid draws again for the same reason).
 */
export function kafkaClusterId(random: (n: number) => Buffer = randomBytes): string {
  for (;;) {
    const id = random(16).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

function javaBase(p: Paths): string[] {
  return ['-Djava.awt.headless=true', `-Dlog4j2.configurationFile=${p.log4j}`, '-cp', `${libsDir(p)}/*`];
}

/**
 * Applies `overrides` to `key=value` lines in place (a changed value gets a comment naming
 * where it came from); keys the text does not have are appended under `comment`.
 */
export function applyProperties(text: string, overrides: Readonly<Record<string, string>>, comment: string, source: string): string {
  const left = new Map(Object.entries(overrides));
  const lines = text.split('\n').flatMap((line) => {
    const m = /^\s*([A-Za-z0-9_.-]+)\s*=(.*)$/.exec(line);
    if (!m || !left.has(m[1]!)) return [line];
    const key = m[1]!;
    const value = left.get(key)!;
    left.delete(key);
    return m[2]!.trim() === value ? [line] : [`# ${source}`, `${key}=${value}`];
  });
  const added = [...left].map(([k, v]) => `${k}=${v}`);
  return added.length === 0 ? lines.join('\n') : [...lines.join('\n').trimEnd().split('\n'), '', `# ${comment}`, ...added, ''].join('\n');
}

/** The cluster overlay (deploy/local/cluster.properties) with its {placeholders} filled in. */
function clusterOverrides(p: Paths, layout: KafkaLayout): Record<string, string> {
  const { replicationFactor, minInsyncReplicas } = internalReplication(layout);
  const text = readFileSync(p.clusterProperties, 'utf8')
    .replaceAll('{replicationFactor}', String(replicationFactor))
    .replaceAll('{minInsyncReplicas}', String(minInsyncReplicas));
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^\s*([A-Za-z0-9_.-]+)\s*=(.*)$/.exec(line);
    if (m) out[m[1]!] = m[2]!.trim();
  }
  return out;
}

/** The generated config of one node: deploy/local/server.properties, its ports and log dir, plus the cluster overlay. */
export function brokerConfig(p: Paths, layout: KafkaLayout, node: KafkaNode, nodes: readonly KafkaNode[]): string {
  const own: Record<string, string> = {
    'node.id': String(node.id),
    'controller.quorum.voters': nodes.map((n) => `${n.id}@${n.host}:${n.controllerPort}`).join(','),
    listeners: `PLAINTEXT://${node.host}:${node.port},CONTROLLER://${node.host}:${node.controllerPort}`,
    'advertised.listeners': `PLAINTEXT://${node.host}:${node.port}`,
    'log.dirs': node.dataDir,
  };
  const source = `reach up: node ${node.id} of ${layout.brokers}`;
  let text = applyProperties(readFileSync(p.serverProperties, 'utf8'), own, source, source);
  if (layout.brokers > 1)
    text = applyProperties(text, clusterOverrides(p, layout), 'reach up: deploy/local/cluster.properties', 'reach up: cluster.properties');
  const header = `# Generated by \`reach up\` from deploy/local/server.properties${layout.brokers > 1 ? ' and deploy/local/cluster.properties' : ''}; edits are overwritten.\n`;
  return header + text;
}

/**
 * Writes every node's config and formats its KRaft storage once, all nodes of a cluster with
 * one cluster id. A node dir formatted for another cluster is refused with the way out.
 */
export async function formatKafka(p: Paths, layout: KafkaLayout): Promise<KafkaNode[]> {
  const nodes = kafkaNodes(p, layout);
  const formatted = nodes.filter((n) => existsSync(join(n.dataDir, 'meta.properties')));
  const clusterIds = new Set(formatted.map((n) => /cluster\.id=(\S+)/.exec(readFileSync(join(n.dataDir, 'meta.properties'), 'utf8'))?.[1]));
  if (clusterIds.size > 1 || (formatted.length > 0 && formatted.length < nodes.length)) {
    const dir = layout.brokers === 1 ? nodes[0]!.dataDir : join(p.home, 'data', `kafka-cluster-${layout.brokers}`);
    throw new Error(`the Kafka data in ${dir} is incomplete or from different clusters; remove ${dir} (its topics are lost) and run reach up again`);
  }
  const clusterId = [...clusterIds][0] ?? kafkaClusterId();
  for (const node of nodes) {
    writeFileSync(node.configFile, brokerConfig(p, layout, node, nodes));
    if (formatted.includes(node)) continue;
    mkdirSync(node.dataDir, { recursive: true });
    await run('java', [...javaBase(p), 'kafka.tools.StorageTool', 'format', '-t', clusterId, '-c', node.configFile], join(p.logs, `${node.name}-format.log`));
  }
  return nodes;
}

/** The broker's class-data-sharing archive for the jars in use and this JVM (kafka-class-archive.ts). */
export function brokerClassArchive(p: Paths): string {
  const libs = libsDir(p);
  return classArchivePath(libs, libsMarker(libs));
}

/** Makes the broker's class archive once (a training run); an error comes back as a message, never thrown. */
export function prepareBrokerClassArchive(p: Paths): Promise<string | undefined> {
  return ensureClassArchive(brokerClassArchive(p), {
    javaBase: javaBase(p),
    config: ({ port, controllerPort, logDir }) =>
      applyProperties(
        readFileSync(p.serverProperties, 'utf8'),
        {
          'node.id': '1',
          'controller.quorum.voters': `1@127.0.0.1:${controllerPort}`,
          listeners: `PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controllerPort}`,
          'advertised.listeners': `PLAINTEXT://127.0.0.1:${port}`,
          'log.dirs': logDir,
        },
        'reach up: class archive training run',
        'reach up: class archive training run',
      ),
    format: (configFile) => run('java', [...javaBase(p), 'kafka.tools.StorageTool', 'format', '-t', kafkaClusterId(), '-c', configFile]),
    logFile: join(p.logs, 'kafka-class-archive.log'),
  });
}

/**
 * A node's command line: a heap of 512 MiB for a single node, 384 MiB per node of a cluster, and
 * the class archive when `reach up` could make one (a restart after kill -9 then starts faster).
 * The heap is fixed and touched at start (-Xms = -Xmx, as Kafka's own scripts set it): grown on
 * demand from 128 MiB, the broker's RSS rose from 506 to 699 MiB over an hour at steady load
 * (`pnpm soak`, 6 December), which is not a leak but hid one if there were.
 */
export function kafkaCommand(p: Paths, layout: KafkaLayout, node: KafkaNode): { cmd: string; args: string[] } {
  const size = layout.brokers === 1 ? '512m' : '384m';
  const heap = [`-Xms${size}`, `-Xmx${size}`, '-XX:+AlwaysPreTouch'];
  const gc = ['-XX:+UseG1GC', '-XX:MaxGCPauseMillis=20', '-XX:+ExitOnOutOfMemoryError'];
  return {
    cmd: 'java',
    args: [...heap, ...gc, ...classArchiveArgs(brokerClassArchive(p)), ...javaBase(p), 'kafka.Kafka', node.configFile],
  };
}
