import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Admin } from 'kafkajs';
import { silentLogger } from '@reach/core';
import { createKafka, createStageConsumer, leaveRecordedMembers, readMemberFile, REBALANCE_TIMEOUT_MS, waitForLeaders } from '@reach/kafka';
import { stack, uniq } from '../../helpers/env.js';

// A member that vanishes without leaving its group (a killed process, or a kafkajs consumer
// that crashed while the broker restarted and came back under a new member id) must not hold
// the stage for long: a new member's join completes once the silent one's session
// (SESSION_TIMEOUT_MS) or the rebalance timeout removes it, whichever comes first. Seen in CI
// with kafkajs's 60 s rebalance timeout and a 30 s session: the dispatcher consumed nothing for
// 30 s after a broker restart, and messages died of their budget.
const kafka = createKafka({ brokers: stack.brokers, clientId: uniq('group-recovery'), logger: silentLogger });
let admin: Admin;
const topic = uniq('it.group-recovery');
const groupId = uniq('it.group-recovery.g');
const ledgerGroupId = uniq('it.group-recovery.ledger');

/** A member of `groupId` in its own process, with the stage settings; resolves once it has joined. */
async function memberInAnotherProcess(group: string = groupId, memberFile?: string): Promise<ReturnType<typeof spawn>> {
  const kafkaDist = join(process.cwd(), 'packages', 'kafka', 'dist', 'index.js');
  const script = `
    import { attachMemberLedger, createKafka, createStageConsumer, MemberLedger } from ${JSON.stringify(kafkaDist)};
    const log = { info() {}, warn() {}, error() {}, fatal() {}, debug() {}, trace() {}, child() { return log; } };
    const kafka = createKafka({ brokers: ${JSON.stringify(stack.brokers)}, clientId: 'vanishing-member', logger: log });
    ${memberFile ? `attachMemberLedger(kafka, new MemberLedger(${JSON.stringify(memberFile)}));` : ''}
    const consumer = createStageConsumer(kafka, ${JSON.stringify(group)}, log, () => process.exit(70));
    consumer.on(consumer.events.GROUP_JOIN, () => console.log('joined'));
    await consumer.connect();
    await consumer.subscribe({ topic: ${JSON.stringify(topic)}, fromBeginning: true });
    await consumer.run({ autoCommit: false, eachBatch: async () => {} });
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d.toString();
      if (out.includes('joined')) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`the member exited with ${code} before joining:\n${out}`)));
    setTimeout(() => reject(new Error(`the member did not join within 60 s:\n${out}`)), 60_000).unref();
  });
  return child;
}

beforeAll(async () => {
  admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: false });
  await waitForLeaders(admin, [topic]);
});

afterAll(async () => {
  await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
  await admin.deleteGroups([groupId, ledgerGroupId]).catch(() => undefined);
  await admin.disconnect();
});

describe('consumer group recovery', () => {
  it('a member killed without leaving holds a new member back only until its session or the rebalance timeout removes it', async () => {
    const vanished = await memberInAnotherProcess();
    const exited = once(vanished, 'exit');
    vanished.kill('SIGKILL'); // no LeaveGroup: the coordinator still counts it as a member
    await exited;

    const consumer = createStageConsumer(kafka, groupId, silentLogger, () => undefined);
    const started = Date.now();
    const joined = new Promise<{ ms: number; partitions: number }>((resolve) =>
      consumer.on(consumer.events.GROUP_JOIN, (e) => {
        const assigned = (e.payload.memberAssignment as Record<string, number[]>)[topic] ?? [];
        resolve({ ms: Date.now() - started, partitions: assigned.length });
      }),
    );
    try {
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      await consumer.run({ autoCommit: false, eachBatch: async () => {} });
      const { ms, partitions } = await joined;
      // Both partitions: the silent member was removed, not given half of the topic.
      expect(partitions).toBe(2);
      // Removed by its session (6 s) or the rebalance timeout (10 s), plus a join.
      expect(ms, `joined after ${ms} ms`).toBeLessThan(REBALANCE_TIMEOUT_MS + 15_000);
    } finally {
      await consumer.disconnect();
    }
  }, 90_000);

  it('a member killed without leaving is removed at once by LeaveGroup for the member id its ledger file recorded (reach up does it when a service dies)', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'reach-members-')), 'svc.members.json');
    const vanished = await memberInAnotherProcess(ledgerGroupId, file);
    const recorded = readMemberFile(file);
    expect(recorded).toHaveLength(1);
    expect(recorded[0]!.groupId).toBe(ledgerGroupId);
    const exited = once(vanished, 'exit');
    vanished.kill('SIGKILL');
    await exited;
    const members = async () => (await admin.describeGroups([ledgerGroupId])).groups[0]!.members.map((m) => m.memberId);
    // Its session has not run out: the coordinator still holds the dead member and its partitions.
    expect(await members()).toEqual([recorded[0]!.memberId]);

    expect(await leaveRecordedMembers(file, kafka)).toBe(1);
    expect(await members()).toEqual([]);
    expect(readMemberFile(file)).toEqual([]); // the file is gone with them
    // Leaving again (a member already gone) is no error.
    await expect(leaveRecordedMembers(file, kafka)).resolves.toBe(0);

    const consumer = createStageConsumer(kafka, ledgerGroupId, silentLogger, () => undefined);
    const joined = new Promise<number>((resolve) =>
      consumer.on(consumer.events.GROUP_JOIN, (e) => resolve(((e.payload.memberAssignment as Record<string, number[]>)[topic] ?? []).length)),
    );
    try {
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      await consumer.run({ autoCommit: false, eachBatch: async () => {} });
      expect(await joined).toBe(2);
    } finally {
      await consumer.disconnect();
    }
  }, 90_000);
});
