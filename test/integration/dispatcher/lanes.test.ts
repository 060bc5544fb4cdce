import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { seededRandom, silentLogger } from '@reach/core';
import { createRedis, ENDED_MESSAGES, type Redis } from '@reach/store';
import { stack } from '../../helpers/env.js';
import { plainKafka, registryClient, TopicTap, statusTap } from '../../helpers/kafka.js';
import { LANES, LaneModel, type LaneIndex, type PerLane } from '../../../services/dispatcher/dist/lanes.js';
import { ReplayBuffer, keys } from '../../../services/dispatcher/dist/replay-buffer.js';
import { CONSUME_PATIENCE_MS, deregisterAgent, flowOf, FlowRouter, Holder, registerAgent, waitForFlow } from './concurrency-harness.js';
import { agentId, messageIdOf, TestAgent } from './harness.js';

// Priority lanes (R-D9). First the promotion script itself, run by real Redis, against the
// TS reference (lanes.ts) on random sequences of arrivals, repeated arrivals (a routed record
// consumed again), acks and wait expiries; then the running dispatcher: one busy slot, a backlog
// of HIGH, NORMAL and LOW, and the order in which they are released — HIGH dominates, LOW
// progresses at its share, FIFO within each lane — also when the records are consumed twice.
const kafka = plainKafka();
const registry = registryClient();
let producer: Producer;
let router: FlowRouter;
let redis: Redis;
let status: TopicTap<Record<string, unknown>>;
const registered: string[] = [];

/** The weights the running dispatcher uses (REACH_PRIORITY_WEIGHTS, as the services read it). */
const WEIGHTS = (process.env.REACH_PRIORITY_WEIGHTS ?? '60,30,10').split(',').map(Number) as unknown as PerLane;

beforeAll(async () => {
  producer = kafka.producer();
  await producer.connect();
  router = await new FlowRouter(producer, registry).init();
  status = await statusTap<Record<string, unknown>>(kafka, registry).open();
  // A database of its own: the running dispatchers' deadline sweepers never see these entries.
  redis = createRedis(stack.redisUrl.replace(/\/\d*$/, '/15'), silentLogger);
});

afterAll(async () => {
  await Promise.all(registered.map(deregisterAgent));
  await Promise.all([status?.close(), producer?.disconnect()]);
  redis?.disconnect();
});

function midOf(i: number): string {
  return `msg_${String(i).padStart(26, '0')}`;
}

/** A buffer entry's parts for item `i` (its message id names it). */
function item(agent: string, i: number, lane: LaneIndex, now: number) {
  const mid = midOf(i);
  return {
    agent,
    messageId: mid,
    head: JSON.stringify({ mid, parent: null, attempt: 0, ctx_ttl_s: 0, budget_at: null, message: { message_id: mid, trace_id: `t${i}` } }),
    attempt: 0,
    messagePart: `,"message":{"message_id":"${mid}","payload":{"i":${i}}}}`,
    deadline: now + 3_600_000,
    windowMs: 3_600_000,
    budgetAt: null,
    lane,
    waitDeadline: now + 3_600_000,
  };
}

/** Removes what the script tests left in Redis for `agent` (items 0 … items-1). */
async function forget(agent: string, items: number): Promise<void> {
  const lanesKeys = LANES.map((_, i) => keys.wait(agent, i as LaneIndex));
  const markers = Array.from({ length: items }, (_, i) => keys.appended(agent, midOf(i), 0));
  await redis.del(keys.seq(agent), keys.buf(agent), keys.credits(agent), keys.order(agent), ...lanesKeys, ...markers);
  const members = await redis.zrangebyscore(keys.waitDeadlines, '-inf', '+inf');
  const deadlines = await redis.zrangebyscore(keys.deadlines, '-inf', '+inf');
  const mine = [...members, ...deadlines].filter((m) => m.startsWith(`${agent}|`));
  if (mine.length > 0)
    await redis
      .multi()
      .zrem(keys.waitDeadlines, ...mine)
      .zrem(keys.deadlines, ...mine)
      .exec();
}

function itemOf(entry: string): number {
  return Number(/"payload":\{"i":(\d+)\}/.exec(entry)![1]);
}

describe('priority lanes: the promotion script against the reference', () => {
  it('promotes exactly what the TS reference picks, on random sequences of arrivals, repeats, acks and expiries', async () => {
    const rand = seededRandom(20260301);
    for (let run = 0; run < 12; run++) {
      const agent = agentId('it.lanes.lua');
      const weights: PerLane = run % 3 === 0 ? [60, 30, 10] : [1 + Math.floor(rand() * 50), 1 + Math.floor(rand() * 50), 1 + Math.floor(rand() * 50)];
      const limit = 1 + Math.floor(rand() * 3);
      // Lopsided arrival mixes (a HIGH flood, a LOW flood, even) make lanes run dry and refill.
      const mix = [rand() * 3, rand(), rand()];
      const pickLane = (): LaneIndex => {
        const x = rand() * (mix[0]! + mix[1]! + mix[2]!);
        return x < mix[0]! ? 0 : x < mix[0]! + mix[1]! ? 1 : 2;
      };
      const buffer = new ReplayBuffer(redis, 1800, { limitOf: () => limit, weights });
      const model = new LaneModel(weights);
      /** In flight: straight in, or promoted from a lane. */
      const inflight: Array<{ seq: number; item: number; promoted: boolean }> = [];
      const waitingOrder = new Map<number, { lane: LaneIndex; order: number }>();
      const laneOfItem: LaneIndex[] = [];
      let nextItem = 0;
      const expectPromotions = (promotions: Array<{ seq: number; entry: string; lane: LaneIndex }>) => {
        for (const p of promotions) {
          const want = model.take();
          expect(want, `run ${run}: a promotion the reference does not make`).toBeDefined();
          expect([p.lane, itemOf(p.entry)], `run ${run}`).toEqual([want!.lane, want!.item]);
          waitingOrder.delete(want!.item);
          inflight.push({ seq: p.seq, item: want!.item, promoted: true });
        }
        // The cap: promote while slots are free and something waits, never beyond.
        const sizes = model.sizes;
        expect(inflight.length === limit || sizes[0] + sizes[1] + sizes[2] === 0, `run ${run}: a free slot left unused`).toBe(true);
        expect(inflight.length).toBeLessThanOrEqual(limit);
      };
      try {
        for (let op = 0; op < 250; op++) {
          const r = rand();
          const now = Date.now();
          if (r < 0.45) {
            const lane = pickLane();
            const i = nextItem++;
            laneOfItem[i] = lane;
            const { results, promotions } = await buffer.appendMany([item(agent, i, lane, now)], now);
            const res = results[0]!;
            if (res.kind === 'inflight') {
              const sizes = model.sizes;
              expect(inflight.length < limit && sizes[0] + sizes[1] + sizes[2] === 0, `run ${run}: straight in with a full slot or a queue`).toBe(true);
              inflight.push({ seq: res.seq, item: i, promoted: false });
            } else if (res.kind === 'waiting') {
              model.push(lane, i);
              waitingOrder.set(i, { lane, order: res.order });
            } else throw new Error(`run ${run}: a first arrival taken for a repeat`);
            expectPromotions(promotions);
          } else if (r < 0.55 && nextItem > 0) {
            // An earlier arrival again (its routed record consumed twice): nothing changes; it
            // says where the delivery still is if it stayed where it went (a promoted one moved).
            const i = Math.floor(rand() * nextItem);
            const { results, promotions } = await buffer.appendMany([item(agent, i, laneOfItem[i]!, now)], now);
            const sent = inflight.find((x) => x.item === i && !x.promoted);
            const waits = waitingOrder.get(i);
            const want = sent
              ? { kind: 'inflight', seq: sent.seq, repeat: true }
              : waits
                ? { kind: 'waiting', order: waits.order, repeat: true }
                : { kind: 'moved' };
            expect(results[0], `run ${run}: repeat of item ${i}`).toMatchObject(want);
            if (sent) expect(itemOf((results[0] as { entry: string }).entry)).toBe(i);
            expect(promotions).toEqual([]);
            expectPromotions([]);
          } else if (r < 0.9 || waitingOrder.size === 0) {
            if (inflight.length === 0) continue;
            const done = inflight.splice(Math.floor(rand() * inflight.length), 1)[0]!;
            const mid = midOf(done.item);
            const taken =
              r < 0.8
                ? await buffer.take(agent, done.seq, mid, false)
                : await buffer.takeExpired(agent, done.seq).then((t) => t && { kind: 'taken' as const, ...t });
            expect(taken?.kind).toBe('taken');
            expectPromotions(taken && taken.kind === 'taken' ? taken.promotions : []);
          } else {
            // A waiting entry's wait deadline passes.
            const victims = [...waitingOrder.keys()];
            const victim = victims[Math.floor(rand() * victims.length)]!;
            const { lane, order } = waitingOrder.get(victim)!;
            expect(await buffer.takeWaiting(agent, lane, order)).toBeDefined();
            waitingOrder.delete(victim);
            expect(model.remove(lane, victim)).toBe(true);
          }
        }
        const state = await buffer.flowState(agent);
        expect([state.inFlight, ...state.waiting]).toEqual([inflight.length, ...model.sizes]);
      } finally {
        await forget(agent, nextItem);
      }
    }
  }, 60_000);

  it('passes over a waiting entry too late to be sent: the slot goes to the next one with time left, the late one stays for the wait-deadline sweep', async () => {
    const agent = agentId('it.lanes.late');
    const buffer = new ReplayBuffer(redis, 1800, { limitOf: () => 1, weights: [60, 30, 10] });
    const now = Date.now();
    // Budget ends: items 1–70 in 500 ms (under the 1 s a send needs; more than the script scans
    // at once, so the scan crosses batches), items 71–72 in a minute.
    const LATE = 70;
    const late = Array.from({ length: LATE }, (_, i) => i + 1);
    const budgeted = (i: number, budgetAt: number) => ({ ...item(agent, i, 1, now), budgetAt, waitDeadline: budgetAt });
    try {
      const first = await buffer.appendMany([budgeted(0, now + 60_000)], now);
      expect(first.results[0]).toMatchObject({ kind: 'inflight' });
      const seq = (first.results[0] as { seq: number }).seq;
      const waiting = await buffer.appendMany(late.map((i) => budgeted(i, now + 500)).concat([LATE + 1, LATE + 2].map((i) => budgeted(i, now + 60_000))), now);
      expect(waiting.results.map((r) => r.kind)).toEqual(Array(LATE + 2).fill('waiting'));

      // The in-flight one is answered: its slot goes to item 71, not to item 1 (sent with 0.5 s
      // left, it would hold the slot until its deadline while its sender is told DEAD).
      const taken = await buffer.take(agent, seq, midOf(0), false, false, now);
      expect(taken?.kind).toBe('taken');
      const promotions = taken && taken.kind === 'taken' ? taken.promotions : [];
      expect(promotions.map((p) => itemOf(p.entry))).toEqual([LATE + 1]);

      // The late ones still wait where they were, for the wait-deadline sweep to end them.
      expect((await buffer.flowState(agent)).waiting).toEqual([0, LATE + 1, 0]);
      const orders = (waiting.results as Array<{ order: number }>).map((r) => r.order);
      for (const order of orders.slice(0, LATE)) expect(await buffer.takeWaiting(agent, 1, order, now + 600)).toBeDefined();
    } finally {
      await forget(agent, LATE + 3);
    }
  });
});

describe('priority lanes: a waiting entry whose message ended (A2A CancelTask, issue #29)', () => {
  it('is dropped, never promoted: the freed slot goes to the next entry, and the wait-deadline sweep finds nothing of it', async () => {
    const agent = agentId('it.lanes.ended');
    const buffer = new ReplayBuffer(redis, 1800, { limitOf: () => 1, weights: [60, 30, 10] });
    const now = Date.now();
    try {
      const first = await buffer.appendMany([item(agent, 0, 1, now)], now);
      const seq = (first.results[0] as { seq: number }).seq;
      // Items 1 and 2 wait behind the one slot; item 1 is canceled while it waits (the mark
      // CancelTask sets in one step with the acks), then a HIGH item 3 arrives.
      const waiting = await buffer.appendMany([item(agent, 1, 1, now), item(agent, 2, 1, now)], now);
      expect(waiting.results.map((r) => r.kind)).toEqual(['waiting', 'waiting']);
      await redis.zadd(ENDED_MESSAGES, now, midOf(1));

      // The in-flight one is answered: the slot goes to item 2; item 1 leaves its lane unsent.
      const taken = await buffer.take(agent, seq, midOf(0), false, false, now);
      expect(taken.kind).toBe('taken');
      expect(taken.kind === 'taken' ? taken.promotions.map((p) => itemOf(p.entry)) : []).toEqual([2]);
      expect(await buffer.flowState(agent)).toEqual({ inFlight: 1, waiting: [0, 0, 0] });
      const order = (waiting.results[0] as { order: number }).order;
      expect(await buffer.takeWaiting(agent, 1, order, now)).toBeUndefined();

      // The same through FILL (a raised max_concurrency promotes into the new slots).
      const more = await buffer.appendMany([item(agent, 3, 0, now), item(agent, 4, 0, now)], now);
      expect(more.results.map((r) => r.kind)).toEqual(['waiting', 'waiting']);
      await redis.zadd(ENDED_MESSAGES, now, midOf(3));
      const wide = new ReplayBuffer(redis, 1800, { limitOf: () => 3, weights: [60, 30, 10] });
      expect((await wide.fill(agent, now)).map((p) => itemOf(p.entry))).toEqual([4]);
      expect((await buffer.flowState(agent)).waiting).toEqual([0, 0, 0]);
    } finally {
      await redis.zrem(ENDED_MESSAGES, midOf(1), midOf(3));
      await forget(agent, 5);
    }
  });
});

describe('appendMany: one script call per agent and fetch (issue 27)', () => {
  it("keeps each delivery's own outcome: agents mixed, a repeat within the call, an ended message, the cap reached midway; all of it again is a repeat", async () => {
    const a = agentId('it.append.a');
    const b = agentId('it.append.b');
    const buffer = new ReplayBuffer(redis, 1800, { limitOf: (agent) => (agent === a ? 3 : 0), weights: [60, 30, 10] });
    const now = Date.now();
    // items 0–4 are a's, 10–11 b's; item 3 was ended (canceled) before it was routed
    const batch = [
      item(a, 0, 1, now),
      item(b, 10, 1, now),
      item(a, 1, 1, now),
      item(a, 1, 1, now),
      item(a, 2, 1, now),
      item(a, 3, 1, now),
      item(a, 4, 1, now),
      item(b, 11, 1, now),
    ];
    await redis.zadd(ENDED_MESSAGES, now, midOf(3));
    try {
      const first = await buffer.appendMany(batch, now);
      const seqOf = (i: number) => (first.results[i] as { seq: number }).seq;
      expect(first.results.map((r) => r.kind)).toEqual(['inflight', 'inflight', 'inflight', 'inflight', 'inflight', 'moved', 'waiting', 'inflight']);
      expect(first.results[3]).toMatchObject({ kind: 'inflight', repeat: true, seq: seqOf(2) });
      expect((first.results[3] as { entry: string }).entry).toContain(`"message_id":"${midOf(1)}"`);
      expect([seqOf(0), seqOf(2), seqOf(4)]).toEqual([seqOf(0), seqOf(0) + 1, seqOf(0) + 2]);
      expect(seqOf(7)).toBe(seqOf(1) + 1);
      expect(first.promotions).toEqual([]);
      expect(await buffer.flowState(a)).toEqual({ inFlight: 3, waiting: [0, 1, 0] });
      expect(await buffer.flowState(b)).toEqual({ inFlight: 2, waiting: [0, 0, 0] });
      // every delivery sent at once has its ack deadline, each with its own seq
      const due = await redis.zrangebyscore(keys.deadlines, now + 3_600_000, now + 3_600_000);
      expect(due.filter((m) => m.startsWith(`${a}|`)).sort()).toEqual([0, 2, 4].map((i) => `${a}|${seqOf(i)}`).sort());
      const stored = await buffer.readAfter(a, 0, 10);
      expect(stored.entries.map((e) => itemOf(e.entry))).toEqual([0, 1, 2]);

      // The same fetch consumed again: nothing is stored twice, each says where it went.
      const again = await buffer.appendMany(batch, now);
      expect(again.results.map((r) => ('repeat' in r ? `${r.kind}:${r.repeat}` : r.kind))).toEqual([
        'inflight:true',
        'inflight:true',
        'inflight:true',
        'inflight:true',
        'inflight:true',
        'moved',
        'waiting:true',
        'inflight:true',
      ]);
      expect(await buffer.flowState(a)).toEqual({ inFlight: 3, waiting: [0, 1, 0] });
    } finally {
      await redis.zrem(ENDED_MESSAGES, midOf(3));
      await forget(a, 5);
      await forget(b, 12);
    }
  });
});

describe('takeAck: the acks of one macrotask taken together (issue 27)', () => {
  it("gives each ack its own outcome — taken and journaled, answered twice, another message, ended — and the freed slots' promotions once", async () => {
    const a = agentId('it.acks');
    const buffer = new ReplayBuffer(redis, 1800, { limitOf: () => 3, weights: [60, 30, 10] });
    const now = Date.now();
    try {
      // items 0–2 in flight (the cap), 3–4 waiting; item 2 ends (canceled) while in flight
      const { results } = await buffer.appendMany(
        [0, 1, 2, 3, 4].map((i) => item(a, i, 1, now)),
        now,
      );
      const seq = (i: number) => (results[i] as { seq: number }).seq;
      expect(results.map((r) => r.kind)).toEqual(['inflight', 'inflight', 'inflight', 'waiting', 'waiting']);
      await redis.zadd(ENDED_MESSAGES, now, midOf(2));
      const at = now + 5;
      const [first, twice, wrong, ended] = await Promise.all([
        buffer.takeAck(a, seq(0), midOf(0), at),
        buffer.takeAck(a, seq(0), midOf(0), at),
        buffer.takeAck(a, seq(1), midOf(9), at),
        buffer.takeAck(a, seq(2), midOf(2), at),
      ]);
      expect(first).toMatchObject({ kind: 'taken' });
      expect(JSON.parse((first as { head: string }).head)).toMatchObject({ mid: midOf(0) });
      expect(twice).toEqual({ kind: 'answered' });
      expect(wrong).toEqual({ kind: 'mismatch' });
      expect(ended).toMatchObject({ kind: 'ended', promotions: [] });
      // two slots freed (items 0 and 2): items 3 and 4 promoted, handed back once, with the first take
      expect((first as { promotions: Array<{ entry: string }> }).promotions.map((p) => itemOf(p.entry))).toEqual([3, 4]);
      expect(await buffer.flowState(a)).toEqual({ inFlight: 3, waiting: [0, 0, 0] });
      // the ack is journaled until its DELIVERED is produced; the ended one is not
      const journaled = await buffer.journaledAcks([midOf(0), midOf(2)]);
      expect(journaled[0]).toMatchObject({ agent: a, seq: seq(0), ackedAt: at });
      expect(journaled[1]).toBeUndefined();
      expect(await redis.zscore(keys.deadlines, `${a}|${seq(0)}`)).toBeNull();
      expect(await redis.zscore(keys.deadlines, `${a}|${seq(1)}`)).not.toBeNull();
      await buffer.settleAck(midOf(0));
    } finally {
      await redis.zrem(ENDED_MESSAGES, midOf(2));
      await forget(a, 5);
    }
  });
});

describe('the seq counter and acks far apart (issue 27: fewer Redis commands per message)', () => {
  it('stores the seq counter once per call, reads acks whose seqs lie far apart one by one, takes each once, and goes on counting from the last seq', async () => {
    const a = agentId('it.acks.sparse');
    const buffer = new ReplayBuffer(redis, 1800, { limitOf: () => 0, weights: [60, 30, 10] });
    const now = Date.now();
    const items = Array.from({ length: 16 }, (_, i) => i);
    try {
      const first = await buffer.appendMany(
        items.map((i) => item(a, i, 1, now)),
        now,
      );
      const seq = (i: number) => (first.results[i] as { seq: number }).seq;
      expect(items.map(seq)).toEqual(items.map((i) => seq(0) + i));
      expect(Number(await redis.get(keys.seq(a)))).toBe(seq(15));
      expect(await redis.ttl(keys.seq(a))).toBeGreaterThan(0);
      // three acks whose seqs span 15 (more than four per ack): each is read by its own seq
      const at = now + 5;
      const [low, high, again] = await Promise.all([
        buffer.takeAck(a, seq(0), midOf(0), at),
        buffer.takeAck(a, seq(15), midOf(15), at),
        buffer.takeAck(a, seq(15), midOf(15), at),
      ]);
      expect(low).toMatchObject({ kind: 'taken' });
      expect(JSON.parse((high as { head: string }).head)).toMatchObject({ mid: midOf(15) });
      expect(again).toEqual({ kind: 'answered' });
      expect(await buffer.flowState(a)).toEqual({ inFlight: 14, waiting: [0, 0, 0] });
      expect(await redis.zscore(keys.deadlines, `${a}|${seq(15)}`)).toBeNull();
      expect(await redis.zscore(keys.deadlines, `${a}|${seq(14)}`)).not.toBeNull();
      const stored = await buffer.readAfter(a, 0, 20);
      expect(stored.entries.map((e) => itemOf(e.entry))).toEqual(items.slice(1, 15));
      // the next call counts on from the stored seq
      const next = await buffer.appendMany([item(a, 16, 1, now)], now);
      expect(next.results[0]).toMatchObject({ kind: 'inflight', seq: seq(15) + 1 });
      await buffer.settleAck(midOf(0));
      await buffer.settleAck(midOf(15));
    } finally {
      await forget(a, 17);
    }
  });
});

describe('priority lanes: the running dispatcher', () => {
  it('releases a HIGH/NORMAL/LOW backlog in weighted order: HIGH dominates, LOW progresses at its share, FIFO per lane', async () => {
    const id = agentId('it.lanes');
    const token = await registerAgent(id, 1);
    registered.push(id);
    await waitForFlow(id, 'the dispatcher to apply max_concurrency 1', (f) => f.max_concurrency === 1);
    const { agent } = await TestAgent.connect(id, { token });
    const holder = new Holder(agent);

    const blocker = router.envelope();
    await router.routeMany(id, [blocker]);
    const held = await holder.nth(1);
    const backlog = [
      ...Array.from({ length: 60 }, (_, i) => router.envelope({ priority: 'HIGH', payload: Buffer.from(JSON.stringify({ lane: 'HIGH', i })) })),
      ...Array.from({ length: 20 }, (_, i) => router.envelope({ priority: 'LOW', payload: Buffer.from(JSON.stringify({ lane: 'LOW', i })) })),
      ...Array.from({ length: 20 }, (_, i) => router.envelope({ priority: 'NORMAL', payload: Buffer.from(JSON.stringify({ lane: 'NORMAL', i })) })),
    ];
    await router.routeMany(id, backlog);
    await waitForFlow(id, 'the whole backlog waiting', (f) => f.in_flight === 1 && f.waiting.HIGH === 60 && f.waiting.NORMAL === 20 && f.waiting.LOW === 20);

    // Release: answer the blocker, then every delivery as soon as it arrives.
    holder.ack(held);
    for (let n = 2; n <= 101; n++) holder.ack(await holder.nth(n));
    expect(holder.maxUnacked).toBe(1);

    const got = holder.received.slice(1).map((f) => (f.message as { payload: { lane: string; i: number } }).payload);
    // What the reference says for the same backlog.
    const model = new LaneModel(WEIGHTS);
    backlog.forEach((env, i) => model.push(LANES.indexOf(env.priority as (typeof LANES)[number]) as LaneIndex, i));
    const expected = Array.from({ length: backlog.length }, () => LANES[model.take()!.lane]);
    expect(got.map((p) => p.lane)).toEqual(expected);

    const first40 = got.slice(0, 40).map((p) => p.lane);
    const share = (lane: string) => first40.filter((l) => l === lane).length;
    if (WEIGHTS.join() === '60,30,10') expect([share('HIGH'), share('NORMAL'), share('LOW')]).toEqual([24, 12, 4]);
    expect(share('LOW')).toBeGreaterThanOrEqual(2);
    expect(share('HIGH')).toBeGreaterThan(share('NORMAL') + share('LOW'));
    for (const lane of LANES) {
      const order = got.filter((p) => p.lane === lane).map((p) => p.i);
      expect(order).toEqual([...order].sort((a, b) => a - b));
    }
    expect(holder.received.slice(1).map(messageIdOf).sort()).toEqual(backlog.map((e) => e.message_id as string).sort());
  }, 120_000);

  it('stores a routed record consumed again only once: the backlog keeps the reference order, and nothing is sent twice', async () => {
    const id = agentId('it.lanes.again');
    const token = await registerAgent(id, 1);
    registered.push(id);
    await waitForFlow(id, 'the dispatcher to apply max_concurrency 1', (f) => f.max_concurrency === 1);
    const { agent } = await TestAgent.connect(id, { token });
    const holder = new Holder(agent);
    const lane = (l: string, i: number) => router.envelope({ priority: l, payload: Buffer.from(JSON.stringify({ lane: l, i })) });
    /** Waits until the dispatcher has consumed `env` (its first DELIVERING), so every record routed before it too. */
    const consumed = (env: Record<string, unknown>) =>
      status.waitFor((r) => r.value?.message_id === env.message_id && r.value?.state === 'DELIVERING', CONSUME_PATIENCE_MS);

    const blocker = router.envelope();
    await router.routeMany(id, [blocker]);
    const held = await holder.nth(1);
    const backlog = [
      ...Array.from({ length: 12 }, (_, i) => lane('HIGH', i)),
      ...Array.from({ length: 4 }, (_, i) => lane('LOW', i)),
      ...Array.from({ length: 4 }, (_, i) => lane('NORMAL', i)),
    ];
    await router.routeMany(id, backlog);
    // The same records once more — what a retried batch, a rebalance or a restart before the
    // offsets were committed hands the dispatcher — the blocker in flight, the rest waiting; then
    // a new one: one partition per agent, so once it is consumed the repeats are too.
    await router.routeMany(id, [blocker, ...backlog]);
    const tail = lane('LOW', 4);
    await router.routeMany(id, [tail]);
    await consumed(tail);
    expect(await flowOf(id)).toMatchObject({ in_flight: 1, waiting: { HIGH: 12, NORMAL: 4, LOW: 5 } });

    holder.ack(held);
    for (let n = 2; n <= 22; n++) holder.ack(await holder.nth(n));
    const model = new LaneModel(WEIGHTS);
    const all = [...backlog, tail];
    all.forEach((env, i) => model.push(LANES.indexOf(env.priority as (typeof LANES)[number]) as LaneIndex, i));
    const expected = all.map(() => all[model.take()!.item]!.message_id);
    expect(holder.received.slice(1).map(messageIdOf)).toEqual(expected);

    // Consumed again after they were all answered: nothing is sent, the next new one is.
    await router.routeMany(id, [blocker, ...backlog.slice(0, 5)]);
    const next = router.envelope();
    await router.routeMany(id, [next]);
    expect(messageIdOf(await holder.nth(23))).toBe(next.message_id);
    holder.ack(holder.received[22]!);
    expect(holder.maxUnacked).toBe(1);
    await waitForFlow(id, 'nothing in flight or waiting', (f) => f.in_flight === 0 && f.waiting.HIGH + f.waiting.NORMAL + f.waiting.LOW === 0);
  }, 120_000);
});
