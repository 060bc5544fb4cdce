import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { defaultHome, libsDir, paths, portOpen, waitFor } from '@reach/cli';
import { createKafka, createProducer, kafkaSecurityFromConfig, leaveGroupMembers, type KafkaSecurityConfig } from '@reach/kafka';
import { eventually } from '../../helpers/wait.js';
import { makePki, type Pki } from '../../helpers/pki.js';

// Kafka with SASL over TLS, from the same jars `reach up` runs: one KRaft node whose client
// listener is SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; certificate from the test's openssl
// CA), SCRAM users created by `kafka-storage format --add-scram`. packages/kafka clients configured
// through the REACH_KAFKA_* options produce and consume through it, wrong credentials and an
// untrusted certificate are refused, and a real process of the stack (the development schema
// registry, which keeps its state in Kafka) runs over SCRAM-SHA-512 + TLS.
const PORT = 12093; // SASL_SSL
const CONTROLLER_PORT = 12094;
const INTERNAL_PORT = 12095; // plaintext, inter-broker only
const REGISTRY_PORT = 12081;
const USERS = {
  'scram-sha-256': { username: 'reach256', password: `s256-${randomBytes(6).toString('hex')}` },
  'scram-sha-512': { username: 'reach512', password: `s512-${randomBytes(6).toString('hex')}` },
  plain: { username: 'reachplain', password: `plain-${randomBytes(6).toString('hex')}` },
} as const;
type Mechanism = keyof typeof USERS;

let pki: Pki;
let dir: string;
let broker: ChildProcess | undefined;
let registry: ChildProcess | undefined;

function securityConfig(mechanism: Mechanism, over: Partial<KafkaSecurityConfig> = {}): KafkaSecurityConfig {
  return {
    kafkaSaslMechanism: mechanism,
    kafkaSaslUsername: USERS[mechanism].username,
    kafkaSaslPassword: USERS[mechanism].password,
    kafkaTls: true,
    kafkaCaFile: pki.caCert,
    caFile: '',
    ...over,
  };
}

function client(cfg: KafkaSecurityConfig, name: string, retries?: number) {
  return createKafka({
    brokers: [`127.0.0.1:${PORT}`],
    clientId: name,
    logger: silentLogger,
    connectionTimeoutMs: 5000,
    security: kafkaSecurityFromConfig(cfg),
    retries,
  });
}

beforeAll(async () => {
  pki = makePki();
  dir = mkdtempSync(join(tmpdir(), 'reach-kafka-sasl-'));
  const conf = join(dir, 'server.properties');
  writeFileSync(
    conf,
    [
      'process.roles=broker,controller',
      'node.id=1',
      `controller.quorum.voters=1@127.0.0.1:${CONTROLLER_PORT}`,
      `listeners=SASL_SSL://127.0.0.1:${PORT},INTERNAL://127.0.0.1:${INTERNAL_PORT},CONTROLLER://127.0.0.1:${CONTROLLER_PORT}`,
      `advertised.listeners=SASL_SSL://127.0.0.1:${PORT},INTERNAL://127.0.0.1:${INTERNAL_PORT}`,
      'controller.listener.names=CONTROLLER',
      'listener.security.protocol.map=SASL_SSL:SASL_SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT',
      'inter.broker.listener.name=INTERNAL',
      'sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512',
      `listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_${USERS.plain.username}="${USERS.plain.password}";`,
      'listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;',
      'listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;',
      'ssl.keystore.type=PEM',
      `ssl.keystore.location=${pki.serverKeyAndCert}`,
      `log.dirs=${join(dir, 'data')}`,
      'offsets.topic.replication.factor=1',
      'offsets.topic.num.partitions=1',
      'transaction.state.log.replication.factor=1',
      'transaction.state.log.min.isr=1',
      'share.coordinator.state.topic.replication.factor=1',
      'share.coordinator.state.topic.min.isr=1',
      'group.coordinator.rebalance.protocols=classic,consumer',
      'group.initial.rebalance.delay.ms=0',
      'auto.create.topics.enable=false',
      'num.partitions=1',
      '',
    ].join('\n'),
  );
  const cp = ['-cp', `${libsDir(paths(defaultHome(), { create: false }))}/*`];
  const format = spawnSync(
    'java',
    [
      '-Xmx128m',
      ...cp,
      'kafka.tools.StorageTool',
      'format',
      '-t',
      randomBytes(16).toString('base64url'),
      '-c',
      conf,
      '--add-scram',
      `SCRAM-SHA-256=[name=${USERS['scram-sha-256'].username},password=${USERS['scram-sha-256'].password}]`,
      '--add-scram',
      `SCRAM-SHA-512=[name=${USERS['scram-sha-512'].username},password=${USERS['scram-sha-512'].password}]`,
    ],
    { encoding: 'utf8' },
  );
  expect(format.status, format.stderr + format.stdout).toBe(0);
  broker = spawn('java', ['-Xms64m', '-Xmx256m', '-XX:+UseSerialGC', '-Djava.awt.headless=true', ...cp, 'kafka.Kafka', conf], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  broker.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  await waitFor(`the SASL_SSL broker on ${PORT}`, () => portOpen('127.0.0.1', PORT), 60_000).catch((err: Error) => {
    throw new Error(`${err.message}\n${stderr}`);
  });
}, 120_000);

afterAll(async () => {
  for (const child of [registry, broker]) {
    if (!child || child.exitCode !== null) continue;
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
    });
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
  pki?.remove();
}, 30_000);

describe('Kafka over SASL_SSL through packages/kafka (REACH_KAFKA_SASL_*, REACH_KAFKA_TLS, REACH_KAFKA_CA_FILE)', () => {
  it.each(['scram-sha-512', 'scram-sha-256', 'plain'] as const)('%s: a producer and a consumer exchange a record', async (mechanism) => {
    const kafka = client(securityConfig(mechanism), `sasl-${mechanism}`);
    const topic = `sasl-test-${mechanism}-${randomBytes(3).toString('hex')}`;
    const admin = kafka.admin();
    await admin.connect();
    try {
      await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 1 }], waitForLeaders: true });
    } finally {
      await admin.disconnect();
    }
    const producer = await createProducer(kafka);
    const consumer = kafka.consumer({ groupId: `${topic}-group` });
    try {
      await producer.send({ topic, acks: -1, messages: [{ key: 'k', value: `hello over ${mechanism}` }] });
      await consumer.connect();
      await consumer.subscribe({ topics: [topic], fromBeginning: true });
      const got = await new Promise<string>((resolve) => {
        void consumer.run({ eachMessage: async ({ message }) => resolve(message.value!.toString()) });
      });
      expect(got).toBe(`hello over ${mechanism}`);
    } finally {
      await consumer.disconnect();
      await producer.disconnect();
    }
  });

  it('a dead member is removed from its group over SCRAM-SHA-512 + TLS (LeaveGroup on takeover, as the supervisor sends it)', async () => {
    const kafka = client(securityConfig('scram-sha-512'), 'sasl-leave');
    const topic = `sasl-leave-${randomBytes(3).toString('hex')}`;
    const groupId = `${topic}-group`;
    const admin = kafka.admin();
    await admin.connect();
    const consumer = kafka.consumer({ groupId, sessionTimeout: 30_000, heartbeatInterval: 3_000 });
    try {
      await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 1 }], waitForLeaders: true });
      const joins: string[] = [];
      const joined = (n: number) => eventually(`join ${n}`, () => (joins.length >= n ? joins[n - 1] : undefined), 30_000);
      consumer.on(consumer.events.GROUP_JOIN, (e) => joins.push(e.payload.memberId));
      await consumer.connect();
      await consumer.subscribe({ topics: [topic] });
      await consumer.run({ eachMessage: async () => undefined });
      const first = await joined(1);
      // As if its process had died: the coordinator is told it left, long before its 30 s session ends.
      await leaveGroupMembers(kafka, [{ groupId, memberId: first }], { deadlineMs: 10_000 });
      const members = async () => (await admin.describeGroups([groupId])).groups[0]!.members.map((m) => m.memberId);
      await eventually('the member gone', async () => ((await members()).includes(first) ? undefined : true), 10_000);
      // A member already gone is no error.
      await expect(leaveGroupMembers(kafka, [{ groupId, memberId: first }])).resolves.toBeUndefined();
    } finally {
      await consumer.disconnect();
      await admin.disconnect();
    }
  });

  it('a wrong password is refused by the broker', async () => {
    const admin = client(securityConfig('scram-sha-512', { kafkaSaslPassword: 'not-the-password' }), 'sasl-wrong').admin();
    await expect(admin.connect()).rejects.toThrow(/SASL SCRAM SHA512 authentication failed|Authentication failed/i);
    await admin.disconnect();
  });

  it('a broker certificate the configured CA did not sign is refused by the client', async () => {
    // Not tried again: the services' half a minute of reconnects would refuse it just the same.
    const admin = client(securityConfig('scram-sha-512', { kafkaCaFile: pki.strangerCaCert }), 'sasl-untrusted', 0).admin({ retry: { retries: 0 } });
    await expect(admin.connect()).rejects.toThrow(/certificate/i);
    await admin.disconnect();
  });

  it('a process of the stack (the development schema registry) keeps its state in Kafka over SCRAM-SHA-512 + TLS', async () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('REACH_')));
    Object.assign(env, {
      REACH_KAFKA_BROKERS: `127.0.0.1:${PORT}`,
      REACH_KAFKA_SASL_MECHANISM: 'scram-sha-512',
      REACH_KAFKA_SASL_USERNAME: USERS['scram-sha-512'].username,
      REACH_KAFKA_SASL_PASSWORD: USERS['scram-sha-512'].password,
      REACH_KAFKA_TLS: 'true',
      REACH_KAFKA_CA_FILE: pki.caCert,
      REACH_DEV_SCHEMA_REGISTRY_PORT: String(REGISTRY_PORT),
      REACH_LOG_LEVEL: 'info',
    });
    registry = spawn(process.execPath, [join(process.cwd(), 'packages/dev-schema-registry/dist/main.js')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    registry.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    registry.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const base = `http://127.0.0.1:${REGISTRY_PORT}`;
    await waitFor('the development registry', async () => (await fetch(`${base}/healthz`)).ok, 60_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${output}`);
    });
    const subject = `sasl-${randomBytes(3).toString('hex')}-value`;
    const res = await fetch(`${base}/subjects/${subject}/versions`, {
      method: 'POST',
      headers: { 'content-type': 'application/vnd.schemaregistry.v1+json' },
      body: JSON.stringify({ schema: JSON.stringify({ type: 'record', name: 'T', fields: [{ name: 'a', type: 'string' }] }) }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    const { id } = (await res.json()) as { id: number };
    // The registration is in the state topic, read back by a SCRAM client of our own.
    const consumer = client(securityConfig('scram-sha-512'), 'sasl-schemas-reader').consumer({ groupId: `schemas-reader-${subject}` });
    try {
      await consumer.connect();
      await consumer.subscribe({ topics: ['_schemas'], fromBeginning: true });
      const found = await new Promise<boolean>((resolve) => {
        void consumer.run({ eachMessage: async ({ message }) => void (message.value?.toString().includes(subject) && resolve(true)) });
      });
      expect(found).toBe(true);
    } finally {
      await consumer.disconnect();
    }
    expect(id).toBeGreaterThan(0);
    expect(output).not.toContain(USERS['scram-sha-512'].password);
  });
});
