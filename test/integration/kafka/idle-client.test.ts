import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProducer, type Producer } from '@reach/kafka';
import { plainKafka } from '../../helpers/kafka.js';

// Regression: kafkajs 2.2.4's request queue re-armed a 1 ms timer forever once a connection had
// answered a request (kafkajs#1556, #1704), so every idle producer and consumer woke its process
// ~1,000 times a second — most of the idle stack's CPU. patches/kafkajs@2.2.4.patch stops it;
// this fails if the patch is not applied (a plain `npm install` of kafkajs, a version bump).
const require = createRequire(import.meta.url);
const RequestQueue = require('kafkajs/src/network/requestQueue/index.js') as { prototype: { checkPendingRequests(): void } };

let producer: Producer;
beforeAll(async () => {
  producer = await createProducer(plainKafka());
  await producer.send({ topic: 'reach.status.v1', acks: -1, messages: [] }).catch(() => undefined);
});
afterAll(async () => {
  await producer.disconnect();
});

describe('an idle kafkajs connection', () => {
  it('does not poll its request queue while nothing is pending', async () => {
    const original = RequestQueue.prototype.checkPendingRequests;
    let calls = 0;
    RequestQueue.prototype.checkPendingRequests = function (this: unknown) {
      calls++;
      original.call(this);
    };
    try {
      await new Promise((r) => setTimeout(r, 500));
    } finally {
      RequestQueue.prototype.checkPendingRequests = original;
    }
    // Unpatched: ~500 calls in 500 ms for the one connection. Patched: none while idle.
    expect(calls).toBeLessThan(5);
  });
});
