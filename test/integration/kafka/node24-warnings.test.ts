import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { stack, uniq } from '../../helpers/env.js';

const run = promisify(execFile);

// kafkajs 2.2.4 armed a timer for `throttledUntil - Date.now()` with throttledUntil = -1 after
// every answered request (kafkajs#1751): a delay of about −1.8e12 ms, which Node 20 silently
// made 1 ms and Node 24 reports as a TimeoutNegativeWarning on stderr. The project's kafkajs
// patch (patches/kafkajs@2.2.4.patch, requestQueue) returns before arming it when nothing is
// pending and nothing is throttled. This runs a producer, a consumer and an admin client of the
// project's kafkajs on the project's Node with --trace-warnings and expects no warning.
describe('kafkajs on Node 24', () => {
  it('produces, consumes and asks for offsets without a TimeoutNegativeWarning', async () => {
    expect(Number(process.versions.node.split('.')[0])).toBeGreaterThanOrEqual(24);
    const topic = 'reach.poison.v1';
    const script = `
      const { Kafka, logLevel } = require('kafkajs');
      (async () => {
        const kafka = new Kafka({ brokers: ${JSON.stringify(stack.brokers)}, logLevel: logLevel.NOTHING });
        const p = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
        await p.connect();
        const c = kafka.consumer({ groupId: ${JSON.stringify(uniq('node24'))}, maxWaitTimeInMs: 100 });
        await c.connect();
        await c.subscribe({ topic: ${JSON.stringify(topic)}, fromBeginning: false });
        await c.run({ eachMessage: async () => {} });
        for (let i = 0; i < 20; i++) await p.send({ topic: ${JSON.stringify(topic)}, acks: -1, messages: [{ key: 'node24-warning-probe', value: 'x' }] });
        const a = kafka.admin(); await a.connect(); await a.fetchTopicOffsets(${JSON.stringify(topic)}); await a.disconnect();
        await new Promise((r) => setTimeout(r, 1000));
        await c.disconnect(); await p.disconnect();
        process.stdout.write('done');
      })().catch((e) => { console.error(e); process.exit(1); });`;
    const { stdout, stderr } = await run(process.execPath, ['--trace-warnings', '-e', script], { cwd: process.cwd(), timeout: 60_000 });
    expect(stdout).toBe('done');
    expect(stderr).not.toContain('TimeoutNegativeWarning');
  }, 90_000);
});
