import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { testClient, uniqueName } from '@reach/sdk/testing';
import { ACK_JOURNAL, createRedis, ENDED_MESSAGES, WORK_IN_PROGRESS, type Redis } from '@reach/store';
import { EndMarks } from '../../../services/retry-scheduler/dist/end-marks.js';
import { settlesLate } from '../../../services/dispatcher/dist/ack-journal.js';
import { ReplayBuffer } from '../../../services/dispatcher/dist/replay-buffer.js';
import { adminToken, stack, urls } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';
import { deregisterAgents, messageIdOf, registeredAgent } from '../dispatcher/harness.js';

// The stuck sweep and a late answer: a message the sweep declares DEAD (its budget ended while
// the delivery was unanswered, e.g. the dispatcher was away) must stay DEAD when its agent
// resends the ack afterwards — the sender was told DEAD. The sweep's mark and the dispatcher's
// take are atomic against each other, so exactly one of them wins: an ack journaled first keeps
// the message from being marked; a mark first makes the dispatcher refuse the ack.
const client = testClient();
const admin = { authorization: `Bearer ${adminToken()}` };
const registered: string[] = [];
let redis: Redis;
let marks: EndMarks;

beforeAll(() => {
  redis = createRedis(stack.redisUrl, silentLogger);
  marks = new EndMarks(redis);
});
afterAll(async () => {
  await deregisterAgents(registered);
  redis?.disconnect();
});

const events = async (id: string) =>
  (
    (await fetch(`${urls.ingress}/v1/messages/${id}/events`, { headers: admin }).then((r) => r.json())) as {
      events: Array<{ state: string }>;
    }
  ).events.map((e) => e.state);

describe('DEAD marks of the stuck sweep', () => {
  it('an ack that comes after the mark is refused: no DELIVERED, and the delivery leaves the buffer', async () => {
    const capability = uniqueName('ended_ack').replace(/-/g, '_');
    const { id, agent } = await registeredAgent(capability, 'it.ended');
    registered.push(id);
    const sent = await client.submit({ capability, payload: {}, headers: { 'reach-preferred-agent': id } });
    const deliver = await agent.next((f) => f.type === 'deliver');
    await eventually('DELIVERING', async () => (await events(sent.message_id)).includes('DELIVERING'));

    const verdict = await marks.mark([sent.message_id], Date.now());
    expect([...verdict.ended]).toEqual([sent.message_id]);
    agent.send({ type: 'ack', seq: deliver.seq, message_id: sent.message_id });
    // The take refused it: the entry and its deadline left, nothing was journaled.
    await eventually('out of the buffer', async () => (await redis.zcount(`reach:buf:{${id}}`, deliver.seq as number, deliver.seq as number)) === 0);
    expect(await redis.zscore('reach:deadlines', `${id}|${deliver.seq as number}`)).toBeNull();
    expect(await redis.hexists(ACK_JOURNAL.acked, sent.message_id)).toBe(0);
    // A second message on the same agent still ends DELIVERED: the refusal was of that message only.
    const next = await client.submit({ capability, payload: {}, headers: { 'reach-preferred-agent': id } });
    const d2 = await agent.next((f) => f.type === 'deliver' && messageIdOf(f) === next.message_id);
    agent.send({ type: 'ack', seq: d2.seq, message_id: next.message_id });
    await eventually('the next one DELIVERED', async () => (await events(next.message_id)).includes('DELIVERED'));
    expect(await events(sent.message_id)).not.toContain('DELIVERED');
    agent.ws.close();
  });

  it('a journaled ack, an ack settled after its budget ended, or reported progress keeps a message from being marked', async () => {
    const acked = uniqueName('msg-acked');
    const settledLate = uniqueName('msg-settled-late');
    const settledInTime = uniqueName('msg-settled-in-time');
    const working = uniqueName('msg-working');
    const idle = uniqueName('msg-idle');
    const now = Date.now();
    await redis
      .multi()
      .hset(ACK_JOURNAL.acked, acked, `it.agent|1|${now}|{}`)
      .hset(ACK_JOURNAL.acked, settledLate, `it.agent|2|${now}|{}`)
      .hset(ACK_JOURNAL.acked, settledInTime, `it.agent|3|${now}|{}`)
      .zadd(WORK_IN_PROGRESS, now + 60_000, working)
      .exec();
    // Their DELIVERED written, both leave the journal; the late one (written after its budget's
    // end, beyond the read-model watermark) is remembered, the one in time is not.
    const buffer = new ReplayBuffer(redis, 300);
    await Promise.all([buffer.settleAck(settledLate, settlesLate(now - 1_000, now)), buffer.settleAck(settledInTime, settlesLate(now + 60_000, now))]);
    try {
      const v = await marks.mark([acked, settledLate, settledInTime, working, idle], now);
      expect([...v.acked].sort()).toEqual([acked, settledLate].sort());
      expect([...v.working]).toEqual([working]);
      expect([...v.ended].sort()).toEqual([idle, settledInTime].sort());
      expect(await redis.zscore(ENDED_MESSAGES, acked)).toBeNull();
      expect(await redis.zscore(ENDED_MESSAGES, settledLate)).toBeNull();
      expect(await redis.zscore(ENDED_MESSAGES, working)).toBeNull();
      expect(Number(await redis.zscore(ENDED_MESSAGES, idle))).toBe(now);
    } finally {
      await redis
        .multi()
        .hdel(ACK_JOURNAL.acked, acked)
        .zrem(ACK_JOURNAL.ackedLate, settledLate)
        .zrem(WORK_IN_PROGRESS, working)
        .zrem(ENDED_MESSAGES, idle, settledInTime)
        .exec();
    }
  });
});
