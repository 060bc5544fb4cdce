import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { testClient, uniqueName } from '@reach/sdk/testing';
import { ACK_JOURNAL, createRedis, type Redis } from '@reach/store';
import { adminToken, stack, urls } from '../../helpers/env.js';
import { countingCalls } from '../../helpers/counting.js';
import { eventually } from '../../helpers/wait.js';
import { ReplayBuffer } from '../../../services/dispatcher/dist/replay-buffer.js';
import { deregisterAgents, registeredAgent } from './harness.js';

// An ack the dispatcher took is journaled with the take (one script) and leaves the journal
// once its DELIVERED event is written. One whose DELIVERED never got written — Kafka away for
// longer than the producer retries, or the dispatcher killed between the take and the produce —
// is produced from the journal by the running dispatcher, with the original ack time.
const client = testClient();
const admin = { authorization: `Bearer ${adminToken()}` };
const registered: string[] = [];
let redis: Redis;

beforeAll(() => {
  redis = createRedis(stack.redisUrl, silentLogger);
});
afterAll(async () => {
  await deregisterAgents(registered);
  redis?.disconnect();
});

const status = async (id: string) =>
  (await fetch(`${urls.ingress}/v1/messages/${id}`, { headers: admin }).then((r) => r.json())) as { status: string; agent_id: string | null; attempt: number };

/** A raw agent for a fresh capability, and the first message delivered to it (not answered). */
async function oneDelivery(what: string) {
  const capability = uniqueName(what).replace(/-/g, '_');
  const { id, agent } = await registeredAgent(capability, 'it.journal');
  registered.push(id);
  const sent = await client.submit({ capability, payload: {}, headers: { 'reach-preferred-agent': id } });
  const deliver = await agent.next((f) => f.type === 'deliver');
  return { id, agent, sent, deliver };
}

describe('the ack journal', () => {
  it('an ack whose DELIVERED was written leaves the journal', async () => {
    const { agent, sent, deliver } = await oneDelivery('journal_ok');
    agent.send({ type: 'ack', seq: deliver.seq, message_id: sent.message_id });
    await eventually('DELIVERED', async () => (await status(sent.message_id)).status === 'DELIVERED');
    await eventually('settled', async () => (await redis.hexists(ACK_JOURNAL.acked, sent.message_id)) === 0);
    expect(await redis.zscore(ACK_JOURNAL.ackedAt, sent.message_id)).toBeNull();
    agent.ws.close();
  });

  it('acks settled at once leave the journal in one write', async () => {
    const counting = countingCalls(redis, ['multi']);
    const buffer = new ReplayBuffer(counting.proxy, 60);
    const ids = Array.from({ length: 30 }, (_, i) => `${uniqueName('journal-batch')}-${i}`);
    // Fresh: the running dispatcher's journal sweep leaves acks younger than its grace alone.
    const at = Date.now();
    await ids.reduce((m, id) => m.hset(ACK_JOURNAL.acked, id, `it.agent|1|${at}|{}`).zadd(ACK_JOURNAL.ackedAt, at, id), redis.multi()).exec();
    await Promise.all(ids.map((id) => buffer.settleAck(id)));
    expect(counting.calls()).toBe(1);
    expect(await redis.hmget(ACK_JOURNAL.acked, ...ids)).toEqual(ids.map(() => null));
    expect(await Promise.all(ids.map((id) => redis.zscore(ACK_JOURNAL.ackedAt, id)))).toEqual(ids.map(() => null));
  });

  it('an ack taken but never produced ends DELIVERED from the journal, at its ack time', async () => {
    const { id, agent, sent, deliver } = await oneDelivery('journal_lost');
    await eventually('DELIVERING', async () => (await status(sent.message_id)).status === 'DELIVERING');
    // What the take script does for an ack, with the produce that would follow lost: the entry
    // leaves the buffer and its deadline, the head goes into the journal.
    const bufKey = `reach:buf:{${id}}`;
    const [entry] = await redis.zrangebyscore(bufKey, deliver.seq as number, deliver.seq as number);
    expect(entry).toBeDefined();
    const head = entry!.slice(0, entry!.indexOf('\n'));
    const ackedAt = Date.now() - 1_000;
    await redis
      .multi()
      .zrem(bufKey, entry!)
      .zrem('reach:deadlines', `${id}|${deliver.seq as number}`)
      .hset(ACK_JOURNAL.acked, sent.message_id, `${id}|${deliver.seq as number}|${ackedAt}|${head}`)
      .zadd(ACK_JOURNAL.ackedAt, ackedAt, sent.message_id)
      .exec();
    const row = await eventually('DELIVERED from the journal', async () => {
      const s = await status(sent.message_id);
      return s.status === 'DELIVERED' ? s : undefined;
    });
    expect(row).toMatchObject({ agent_id: id, attempt: 0 });
    const { events } = (await fetch(`${urls.ingress}/v1/messages/${sent.message_id}/events`, { headers: admin }).then((r) => r.json())) as {
      events: Array<{ state: string; at: string; code: number | null }>;
    };
    const delivered = events.filter((e) => e.state === 'DELIVERED');
    expect(delivered).toHaveLength(1);
    expect(Date.parse(delivered[0]!.at)).toBe(ackedAt);
    expect(events.filter((e) => e.code !== null)).toEqual([]); // never failed, never retried
    expect(await redis.hexists(ACK_JOURNAL.acked, sent.message_id)).toBe(0);
    agent.ws.close();
  });
});
