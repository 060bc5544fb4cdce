import { afterEach, describe, expect, it, vi } from 'vitest';
import { signToken } from '@reach/core';
import {
  DedupeCache,
  EarlyBeat,
  LoadTracker,
  SessionContext,
  WorkQueue,
  contextFromHeaders,
  contextToHeaders,
  dedupeKey,
  parseServerFrame,
  progressIntervalMs,
  reconnectDelayMs,
  refreshDelayMs,
  tokenLifetime,
  connectionFromEnv,
} from '@reach/sdk';

describe('progress while a handler runs', () => {
  it('reports every third of the ack window, between 0.5 s and 10 s', () => {
    const now = 1_000_000;
    expect(progressIntervalMs({ deadline: now + 10_000 }, now)).toBe(3_333);
    expect(progressIntervalMs({ deadline: now + 600 }, now)).toBe(500);
    expect(progressIntervalMs({ deadline: now + 120_000 }, now)).toBe(10_000);
    expect(progressIntervalMs({ deadline: undefined }, now)).toBe(3_000);
  });
});

describe('reconnect backoff (R-G1: 1 s doubling to 32 s plus jitter)', () => {
  it('doubles from 1 s and stays at 32 s without jitter', () => {
    const schedule = Array.from({ length: 9 }, (_, i) => reconnectDelayMs(i, () => 0));
    expect(schedule).toEqual([1000, 2000, 4000, 8000, 16000, 32000, 32000, 32000, 32000]);
  });

  it('adds at most 20 % jitter on top', () => {
    expect(Array.from({ length: 7 }, (_, i) => reconnectDelayMs(i, () => 1))).toEqual([1200, 2400, 4800, 9600, 19200, 38400, 38400]);
    for (let i = 0; i < 200; i++) {
      const attempt = i % 8;
      const plain = Math.min(1000 * 2 ** attempt, 32000);
      const d = reconnectDelayMs(attempt);
      expect(d).toBeGreaterThanOrEqual(plain);
      expect(d).toBeLessThanOrEqual(plain * 1.2);
    }
  });

  it('stays finite for huge attempt numbers and honours other bounds', () => {
    expect(reconnectDelayMs(10_000, () => 0)).toBe(32000);
    expect(reconnectDelayMs(3, () => 0, { baseMs: 10, maxMs: 50 })).toBe(50);
  });
});

describe('DedupeCache (R-G2, R-G4)', () => {
  const ok = (payload: unknown) => ({ kind: 'ok' as const, payload, headers: {} });

  it('keys by producer + idempotency key, else by message id', () => {
    expect(dedupeKey({ producer: 'a', idempotency_key: 'k', message_id: 'm1' })).toBe(dedupeKey({ producer: 'a', idempotency_key: 'k', message_id: 'm2' }));
    expect(dedupeKey({ producer: 'a', idempotency_key: 'k', message_id: 'm1' })).not.toBe(dedupeKey({ producer: 'b', idempotency_key: 'k', message_id: 'm1' }));
    expect(dedupeKey({ producer: 'a', idempotency_key: null, message_id: 'm1' })).toBe('id:m1');
  });

  it('forgets results after the TTL (30 min by default)', () => {
    let now = 0;
    const cache = new DedupeCache({ now: () => now });
    cache.set('k', ok(1));
    now = 30 * 60_000 - 1;
    expect(cache.get('k')).toEqual(ok(1));
    now = 30 * 60_000 + 1;
    expect(cache.get('k')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('evicts the least recently used entry beyond maxEntries', () => {
    const cache = new DedupeCache({ maxEntries: 2 });
    cache.set('a', ok('a'));
    cache.set('b', ok('b'));
    cache.get('a');
    cache.set('c', ok('c'));
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toEqual(ok('a'));
    expect(cache.get('c')).toEqual(ok('c'));
  });

  it('bounds the bytes it holds and skips a result larger than the whole budget', () => {
    const cache = new DedupeCache({ maxBytes: 200 });
    cache.set('a', ok('x'.repeat(80)));
    cache.set('b', ok('y'.repeat(80)));
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('b')).toBeDefined();
    expect(cache.byteSize).toBeLessThanOrEqual(200);
    cache.set('huge', ok('z'.repeat(500)));
    expect(cache.get('huge')).toBeUndefined();
    expect(cache.get('b')).toBeDefined();
  });
});

describe('WorkQueue (max_concurrency with a local queue)', () => {
  it('runs at most `limit` jobs, the rest wait in order', async () => {
    const releases: Array<() => void> = [];
    const order: number[] = [];
    const q = new WorkQueue<number>(2, (n) => {
      order.push(n);
      return new Promise<void>((resolve) => releases.push(resolve));
    });
    for (let i = 1; i <= 5; i++) q.push(i);
    expect(q.running).toBe(2);
    expect(q.queued).toBe(3);
    releases.shift()!();
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual([1, 2, 3]);
    expect(q.running).toBe(2);
    expect(q.takeQueued()).toEqual([4, 5]);
    const idle = q.idle();
    releases.splice(0).forEach((r) => r());
    await idle;
    expect(q.running).toBe(0);
  });

  it('keeps going when a job throws', async () => {
    const q = new WorkQueue<number>(1, (n) => (n === 1 ? Promise.reject(new Error('boom')) : Promise.resolve()));
    q.push(1);
    q.push(2);
    await q.idle();
    expect(q.running + q.queued).toBe(0);
  });

  it('says when the number of running jobs changed, not when a waiting job took a freed slot', async () => {
    const releases: Array<() => void> = [];
    const seen: number[] = [];
    const q: WorkQueue<number> = new WorkQueue<number>(
      2,
      () => new Promise<void>((resolve) => releases.push(resolve)),
      () => seen.push(q.running),
    );
    q.push(1);
    q.push(2);
    q.push(3); // waits: running stays 2
    expect(seen).toEqual([1, 2]);
    releases.shift()!(); // job 3 takes the slot
    await new Promise((r) => setImmediate(r));
    expect(seen).toEqual([1, 2]);
    releases.shift()!();
    await new Promise((r) => setImmediate(r));
    expect(seen).toEqual([1, 2, 1]);
  });

  it('refuses a non-positive limit', () => {
    expect(() => new WorkQueue(0, () => Promise.resolve())).toThrow(RangeError);
  });
});

describe('EarlyBeat (a heartbeat when the load crosses the busy line)', () => {
  afterEach(() => vi.useRealTimers());

  function node(maxConcurrency: number) {
    vi.useFakeTimers({ now: 1_000_000 });
    let running = 0;
    const beats: number[] = [];
    let busyBeat = false;
    const early: EarlyBeat = new EarlyBeat({
      maxConcurrency,
      running: () => running,
      beat: () => {
        if (busyBeat) return false;
        beats.push(running);
        early.sent(running);
        return true;
      },
    });
    return {
      early,
      beats,
      set: (n: number) => {
        running = n;
        early.changed();
      },
      beatInFlight: (v: boolean) => (busyBeat = v),
    };
  }

  it('beats when a slot frees after a busy report, and when the node fills up, at most once per gap', () => {
    const n = node(1);
    n.early.sent(0); // the regular heartbeat: idle
    n.set(1); // full: routers must stop choosing it, but the last beat was just now
    vi.advanceTimersByTime(1_999);
    expect(n.beats).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(n.beats).toEqual([1]);
    vi.advanceTimersByTime(10_000);
    n.set(0); // the only slot freed, 10 s after the busy report: at once
    vi.advanceTimersByTime(0);
    expect(n.beats).toEqual([1, 0]);
  });

  it('stays quiet while the load stays on one side of the line, or crosses back before the beat', () => {
    const n = node(10);
    n.early.sent(2);
    for (const x of [3, 4, 2, 1, 4]) n.set(x); // below 5 of 10: the report holds
    vi.advanceTimersByTime(5_000);
    expect(n.beats).toEqual([]);
    n.early.sent(0);
    n.set(6);
    n.set(4); // back below before the gap ends: nothing to correct
    vi.advanceTimersByTime(5_000);
    expect(n.beats).toEqual([]);
  });

  it('tries again after the gap when a heartbeat is already on its way, and never after stop()', () => {
    const n = node(2);
    n.early.sent(2);
    vi.advanceTimersByTime(5_000);
    n.beatInFlight(true);
    n.set(0);
    vi.advanceTimersByTime(0);
    expect(n.beats).toEqual([]);
    n.beatInFlight(false);
    vi.advanceTimersByTime(2_000);
    expect(n.beats).toEqual([0]);
    n.set(2);
    n.early.stop();
    vi.advanceTimersByTime(10_000);
    expect(n.beats).toEqual([0]);
  });
});

describe('LoadTracker (heartbeat load, R-A5)', () => {
  it('reports running, queued, mean latency and the recent success ratio', () => {
    const now = 0;
    const t = new LoadTracker({ now: () => now });
    expect(t.snapshot(0, 0)).toEqual({ current_load: 0, queue_length: 0, avg_latency_ms: 0, health: 1 });
    t.record(true, 10);
    t.record(true, 20);
    t.record(false, 30);
    t.record(true, 40);
    // three successes of four, weighed with ten successes' worth of trust: 13 / 14
    expect(t.snapshot(3, 7)).toEqual({ current_load: 3, queue_length: 7, avg_latency_ms: 25, health: 0.929 });
  });

  it('does not read one failure as a broken agent (it read health 0: COOLDOWN and 2001 for its senders)', () => {
    const health = (outcomes: boolean[]) => {
      const t = new LoadTracker();
      for (const ok of outcomes) t.record(ok, 5);
      return t.snapshot(0, 0).health;
    };
    expect(health([false])).toBe(0.909);
    expect(health(Array.from({ length: 20 }, () => false))).toBe(0.333);
    expect(health(Array.from({ length: 100 }, (_, i) => i % 20 !== 0))).toBe(0.955);
  });

  it('only counts the last five minutes', () => {
    let now = 0;
    const t = new LoadTracker({ now: () => now });
    t.record(false, 100);
    now = 4 * 60_000;
    t.record(true, 10);
    now = 5 * 60_000 + 1;
    expect(t.snapshot(0, 0)).toMatchObject({ health: 1, avg_latency_ms: 10 });
  });
});

describe('session context fragments (R-G3)', () => {
  it('reads reach-context-* headers and returns only what the handler set', () => {
    const s = new SessionContext({ 'reach-context-user': '{"id":7}', 'reach-context-lang': 'de', other: 'x' }, 'sess-1');
    expect(s.id).toBe('sess-1');
    expect(s.getJson<{ id: number }>('user')).toEqual({ id: 7 });
    expect(s.get('other')).toBeUndefined();
    s.set('lang', 'en');
    s.setJson('summary', { n: 1 });
    expect(s.get('lang')).toBe('en');
    expect(s.all()).toEqual({ user: '{"id":7}', lang: 'en', summary: '{"n":1}' });
    expect(s.changes()).toEqual({ lang: 'en', summary: '{"n":1}' });
    expect(contextToHeaders(s.changes())).toEqual({ 'reach-context-lang': 'en', 'reach-context-summary': '{"n":1}' });
  });

  it('round-trips through headers and refuses names that are not header-safe', () => {
    expect(contextFromHeaders(contextToHeaders({ a: '1', 'b.c-d_e': '2' }))).toEqual({ a: '1', 'b.c-d_e': '2' });
    expect(() => contextToHeaders({ 'bad name': 'x' })).toThrow(RangeError);
    expect(new SessionContext({ 'reach-context-x': 'not json' }).getJson('x')).toBeUndefined();
  });
});

describe('server frames (docs/design.md §4), read tolerantly', () => {
  it('parses deliver with defaults filled in and the deadline as epoch ms', () => {
    const f = parseServerFrame(
      JSON.stringify({
        type: 'deliver',
        seq: 4,
        attempt: 1,
        deadline: '2030-01-01T00:00:00.000Z',
        unknown_field: true,
        message: { message_id: 'msg_1', capability: 'x', producer: 'p', payload: { a: 1 } },
      }),
    );
    expect(f).toMatchObject({ type: 'deliver', seq: 4, attempt: 1, deadline: Date.parse('2030-01-01T00:00:00.000Z') });
    expect(f?.type === 'deliver' && f.message).toMatchObject({
      message_id: 'msg_1',
      capability: 'x',
      topic: null,
      headers: {},
      priority: 'NORMAL',
      payload: { a: 1 },
    });
  });

  it('ignores garbage, unknown types and deliver frames without seq or message id', () => {
    expect(parseServerFrame('not json')).toBeUndefined();
    expect(parseServerFrame('[1]')).toBeUndefined();
    expect(parseServerFrame('{"type":"future_frame"}')).toBeUndefined();
    expect(parseServerFrame('{"type":"deliver","message":{"message_id":"m"}}')).toBeUndefined();
    expect(parseServerFrame('{"type":"deliver","seq":1,"message":{}}')).toBeUndefined();
  });

  it('parses welcome, accepted, error and ping', () => {
    expect(parseServerFrame('{"type":"welcome","connection_id":"c","heartbeat_ms":15000,"resume_from":3}')).toEqual({
      type: 'welcome',
      connection_id: 'c',
      heartbeat_ms: 15000,
      resume_from: 3,
    });
    expect(parseServerFrame('{"type":"accepted","client_ref":"r","message_id":"m"}')).toEqual({ type: 'accepted', client_ref: 'r', message_id: 'm' });
    expect(parseServerFrame('{"type":"error","code":4129,"name":"RATE_LIMITED","message":"slow down","client_ref":"r"}')).toEqual({
      type: 'error',
      code: 4129,
      name: 'RATE_LIMITED',
      message: 'slow down',
      client_ref: 'r',
    });
    expect(parseServerFrame('{"type":"ping","ts":5}')).toEqual({ type: 'ping', ts: 5 });
  });
});

describe('token refresh timing', () => {
  it('reads iat/exp from an rt1 token and renews at 80 % of its lifetime', () => {
    const now = 1_700_000_000_000;
    const token = signToken({ sub: 'a', jti: 'j', iat: now / 1000, exp: now / 1000 + 3600, dom: 'default' }, 'secret-secret-secret');
    expect(tokenLifetime(token)).toEqual({ issuedAt: now, expiresAt: now + 3_600_000 });
    expect(refreshDelayMs(token, now)).toBe(2_880_000);
    expect(refreshDelayMs(token, now + 3_000_000)).toBe(1000);
  });

  it('assumes an hour for an unreadable token', () => {
    expect(tokenLifetime('opaque')).toBeUndefined();
    expect(refreshDelayMs('opaque', 0)).toBe(2_880_000);
  });
});

describe('connectionFromEnv', () => {
  it('reads AGENT_REACH_* (never REACH_*, which the services own) with local defaults', () => {
    expect(connectionFromEnv({})).toEqual({
      registryUrl: 'http://127.0.0.1:7411',
      dispatcherUrl: 'ws://127.0.0.1:7412/v1/connect',
      ingressUrl: 'http://127.0.0.1:7410',
    });
    expect(
      connectionFromEnv({
        AGENT_REACH_REGISTRY_URL: 'http://r:1',
        AGENT_REACH_DISPATCHER_URL: 'ws://d:2/v1/connect',
        AGENT_REACH_INGRESS_URL: 'http://i:3',
        AGENT_REACH_TOKEN: 'tok',
        REACH_REGISTRY_PORT: '9',
      }),
    ).toEqual({ registryUrl: 'http://r:1', dispatcherUrl: 'ws://d:2/v1/connect', ingressUrl: 'http://i:3', token: 'tok' });
  });
});
