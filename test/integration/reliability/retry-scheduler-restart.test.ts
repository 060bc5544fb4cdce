import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { plainKafka, registryClient, TopicTap, type Tapped } from '../../helpers/kafka.js';
import { uniq, urls } from '../../helpers/env.js';
import { testEnvelope } from '../../helpers/envelope.js';

// Issue #4 point 2: a backoff delay survives a restart of the real retry-scheduler service.
// delay-stage.test.ts proves the mechanism (a record is committed only once handled) on a private
// topic; this restarts the running service itself (`reach restart retry-scheduler`) while a
// RetryRequest is parked on reach.retry.v1, and checks it is re-published once, not before it
// is due, and no later than due + its jitter allowance + the time the restart took.
const run = promisify(execFile);
const kafka = plainKafka();
const registry = registryClient();
const CLI = join(process.cwd(), 'packages/cli/dist/bin.js');
let producer: Producer;
let retrySchemaId: number;
let pending: TopicTap<Record<string, unknown>>;

beforeAll(async () => {
  producer = kafka.producer();
  await producer.connect();
  retrySchemaId = await registry.getLatestSchemaId('reach.retry.v1-value');
  pending = await new TopicTap<Record<string, unknown>>(kafka, 'reach.pending.v1', registry).open();
}, 60_000);

afterAll(async () => {
  await Promise.all([pending?.close(), producer?.disconnect()]);
});

function envelope(capability: string): Record<string, unknown> {
  return testEnvelope({ capability, payload: Buffer.from('{}') });
}

/** A failed attempt 0 waiting for its backoff, as the dispatcher writes it. */
async function sendRetry(env: Record<string, unknown>, notBefore: number, partition: number): Promise<void> {
  const req = {
    message_id: env.message_id,
    attempt: 0,
    not_before: notBefore,
    code: 3002,
    reason: 'ACK_TIMEOUT',
    failed_agent_id: null,
    exclude_agent_ids: [],
    first_attempt_at: env.created_at,
    envelope: env,
  };
  await producer.send({
    topic: 'reach.retry.v1',
    acks: -1,
    messages: [{ key: env.message_id as string, value: await registry.encode(retrySchemaId, req), partition }],
  });
}

async function pauses(): Promise<number> {
  const text = await (await fetch(`${urls.retryScheduler}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('reach_retry_scheduler_partition_pauses_total'));
  return line ? Number(line.split(' ')[1]) : 0;
}

async function until(what: string, cond: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const republished = (id: unknown) => (r: Tapped<Record<string, unknown>>) =>
  r.value !== undefined && r.value.message_id === id && r.value.message_type !== 'reach.receipt';

describe('retry-scheduler restart (issue #4 point 2)', () => {
  it('a request parked when the service restarts is re-published exactly once, not before due and within due + 20 % + 100 ms + the restart', async () => {
    const capability = uniq('rel_restart').replace(/-/g, '_');
    const env = envelope(capability);
    // A second request on the same partition, due later: once it is re-published, the first
    // (ahead of it in the partition) has been handled and any repeat of it would have come first.
    const marker = envelope(capability);
    const partition = 0;
    const delayMs = 4_000;
    const pausesBefore = await pauses();
    const due = Date.now() + delayMs;
    await sendRetry(env, due, partition);
    await sendRetry(marker, due + 500, partition);
    // The running instance has taken the request and parked the partition until it is due.
    await until('the retry-scheduler to park a partition', async () => (await pauses()) > pausesBefore);

    const restartStarted = Date.now();
    // Rejects on a non-zero exit; returns once the new process answers /readyz.
    const { stdout, stderr } = await run(process.execPath, [CLI, 'restart', 'retry-scheduler'], { timeout: 90_000 });
    const restartMs = Date.now() - restartStarted;
    expect(`${stdout}${stderr}`).toMatch(/retry-scheduler restarted/);

    const first = await pending.waitFor(republished(env.message_id), delayMs + restartMs + 30_000);
    await pending.waitFor(republished(marker.message_id), 30_000);
    expect(first.timestamp).toBeGreaterThanOrEqual(due);
    expect(first.timestamp).toBeLessThanOrEqual(due + delayMs * 0.2 + 100 + restartMs);
    expect(first.headers['reach-attempt']).toBe('1');
    expect(pending.records.filter(republished(env.message_id))).toHaveLength(1);
  }, 120_000);
});
