import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { newMessageId } from '@reach/core';
import { AgentNode, AgentReplacedError, NonRetryableError, ReachError, type AgentNodeOptions, type ReachMessage } from '@reach/sdk';
import { FakeReach, gate } from './fake-reach.js';

// The SDK's own behaviour against an in-process fake registry + dispatcher (fake-reach.ts):
// frame handling, concurrency, dedupe, reconnect, token refresh, send/request, shutdown.
// The same behaviour against the real services is in test/integration/sdk.

let fake: FakeReach;
const nodes: AgentNode[] = [];

beforeEach(async () => {
  fake = await new FakeReach().start();
});

afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop({ drainTimeoutMs: 200 })));
  await fake.stop();
});

function makeNode(opts: Partial<AgentNodeOptions> = {}): AgentNode {
  const node = new AgentNode({
    registryUrl: fake.registryUrl,
    dispatcherUrl: fake.dispatcherUrl,
    descriptor: { agent_type: 'test', metadata: { max_concurrency: 4 } },
    token: 'enroll-token',
    handleSignals: false,
    reconnect: { baseMs: 20, maxMs: 100 },
    ...opts,
  });
  nodes.push(node);
  return node;
}

const acks = () => fake.framesOf('ack');
const rejects = () => fake.framesOf('reject');
const results = () => fake.framesOf('result');

describe('AgentNode start', () => {
  it('registers its capabilities with the enrollment token, then says hello with its agent id, token and last_seq', async () => {
    const node = makeNode({
      descriptor: { agent_type: 'pdf', capabilities: [{ name: 'parse_pdf', tags: ['docs'] }], metadata: { max_concurrency: 3 }, ttl_s: 30 },
    });
    node.handle('parse_pdf', async () => 'ok');
    node.handle('summarise', async () => 'ok');
    node.subscribe('orders.created', async () => undefined);
    await node.start();
    expect(fake.registrations).toHaveLength(1);
    const reg = fake.registrations[0]!;
    expect(reg.auth).toBe('Bearer enroll-token');
    expect(reg.body).toMatchObject({ agent_type: 'pdf', ttl_s: 30, metadata: { max_concurrency: 3 } });
    expect(reg.body.capabilities).toEqual([
      { name: 'parse_pdf', mode: 'handle', tags: ['docs'] },
      { name: 'summarise', mode: 'handle' },
      { name: 'orders.created', mode: 'subscribe' },
    ]);
    expect(fake.hellos).toHaveLength(1);
    expect(fake.hellos[0]).toMatchObject({ agent_id: reg.agent_id, token: reg.token, last_seq: 0 });
    expect(node.agentId).toBe(reg.agent_id);
    expect(node.connected).toBe(true);
  });

  it('refuses handle() after start and start() twice', async () => {
    const node = makeNode();
    await node.start();
    expect(() => node.handle('late', async () => 1)).toThrow(/before start/);
    await expect(node.start()).rejects.toThrow(/twice/);
  });

  it('fails start() with 1003 when the dispatcher refuses the hello, and deregisters', async () => {
    const node = makeNode({ connectTimeoutMs: 2000 });
    // The fake welcomes every hello; here it closes with 4003 instead, as the dispatcher does on a bad token.
    const server = (fake as unknown as { wss: import('ws').WebSocketServer }).wss;
    server.removeAllListeners('connection');
    server.on('connection', (ws) => ws.once('message', () => ws.close(4003, 'auth failed')));
    const err = await node.start().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ReachError);
    expect((err as ReachError).code).toBe(1003);
    expect(fake.deregistrations).toHaveLength(1);
    expect(node.status).toBe('stopped');
  });
});

describe('deliveries', () => {
  it('runs the handler for the capability, sends the result, then acks', async () => {
    const node = makeNode();
    const seen: ReachMessage[] = [];
    node.handle<{ text: string }>('echo', async (msg) => {
      seen.push(msg);
      return { echoed: msg.payload!.text };
    });
    await node.start();
    const id = newMessageId();
    const seq = fake.deliver({ message_id: id, capability: 'echo', payload: { text: 'hi' } });
    await fake.until('ack', () => acks().length === 1);
    expect(seen).toHaveLength(1);
    // The result names its delivery's seq: re-sent after a reconnect, it still finds it.
    expect(results()).toEqual([{ type: 'result', message_id: id, seq, status: 'ok', payload: { echoed: 'hi' } }]);
    expect(acks()).toEqual([{ type: 'ack', seq, message_id: id }]);
    // The result frame goes out before the ack, so DELIVERED never precedes the result.
    const types = fake.frames.map((f) => f.frame.type).filter((t) => t === 'ack' || t === 'result');
    expect(types).toEqual(['result', 'ack']);
  });

  it('acks topic events without a result, and answers a message with reply_to', async () => {
    const node = makeNode();
    node.subscribe('news', async () => 'ignored');
    await node.start();
    fake.deliver({ topic: 'news', message_type: 'event', payload: 1 });
    await fake.until('ack', () => acks().length === 1);
    expect(results()).toHaveLength(0);
    const asked = newMessageId();
    const askedSeq = fake.deliver({ message_id: asked, topic: 'news', message_type: 'event', reply_to: 'agent.asker', payload: 2 });
    await fake.until('second ack', () => acks().length === 2);
    expect(results()).toEqual([{ type: 'result', message_id: asked, seq: askedSeq, status: 'ok', payload: 'ignored' }]);
  });

  it('rejects with the code and retryable flag of a thrown ReachError; other errors are 3003 retryable', async () => {
    const node = makeNode();
    node.handle('strict', async () => {
      throw new NonRetryableError('INVALID_ENVELOPE', 'field x is missing');
    });
    node.handle('flaky', async () => {
      throw new Error('database down');
    });
    node.handle('busy', async () => {
      throw new ReachError('SATURATED', 'try later');
    });
    await node.start();
    const a = newMessageId();
    const b = newMessageId();
    const c = newMessageId();
    const sa = fake.deliver({ message_id: a, capability: 'strict' });
    const sb = fake.deliver({ message_id: b, capability: 'flaky' });
    const sc = fake.deliver({ message_id: c, capability: 'busy' });
    await fake.until('3 rejects', () => rejects().length === 3);
    expect(rejects()).toEqual(
      expect.arrayContaining([
        { type: 'reject', seq: sa, message_id: a, code: 4101, reason: 'field x is missing', retryable: false },
        { type: 'reject', seq: sb, message_id: b, code: 3003, reason: 'database down', retryable: true },
        { type: 'reject', seq: sc, message_id: c, code: 2002, reason: 'try later', retryable: true },
      ]),
    );
    expect(acks()).toHaveLength(0);
  });

  it('rejects a capability it has no handler for as retryable (another agent may serve it)', async () => {
    const node = makeNode();
    await node.start();
    const id = newMessageId();
    fake.deliver({ message_id: id, capability: 'unknown_cap' });
    await fake.until('reject', () => rejects().length === 1);
    expect(rejects()[0]).toMatchObject({ message_id: id, code: 3003, retryable: true });
  });

  it('serves a version-pinned capability name@major with the handler of the name', async () => {
    const node = makeNode();
    node.handle('parse_pdf', async () => 'v');
    await node.start();
    fake.deliver({ capability: 'parse_pdf@2' });
    await fake.until('ack', () => acks().length === 1);
  });

  it('runs at most max_concurrency handlers; the rest wait locally and are reported as queue_length', async () => {
    const node = makeNode({ descriptor: { agent_type: 't', metadata: { max_concurrency: 2 } } });
    const release = gate();
    let running = 0;
    let peak = 0;
    node.handle('slow', async () => {
      running++;
      peak = Math.max(peak, running);
      await release.promise;
      running--;
      return 'done';
    });
    await node.start();
    for (let i = 0; i < 5; i++) fake.deliver({ capability: 'slow' });
    await fake.until('load 2 + queue 3 in a heartbeat', () => fake.heartbeats.find((h) => h.body.current_load === 2 && h.body.queue_length === 3));
    expect(node.load()).toMatchObject({ current_load: 2, queue_length: 3 });
    expect(acks()).toHaveLength(0);
    release.open();
    await fake.until('5 acks', () => acks().length === 5);
    expect(peak).toBe(2);
    await fake.until('an idle heartbeat', () => fake.heartbeats.find((h) => h.body.current_load === 0 && h.body.queue_length === 0 && h.body.health === 1));
  });

  it('keeps heartbeating with its real load while a handler waits (heartbeats come from a timer)', async () => {
    const node = makeNode();
    const release = gate();
    node.handle('wait', async () => {
      await release.promise;
      return 1;
    });
    await node.start();
    fake.deliver({ capability: 'wait' });
    await fake.until('a busy heartbeat', () => fake.heartbeats.find((h) => h.body.current_load === 1));
    const before = fake.heartbeats.length;
    await fake.until('three more heartbeats while the handler still runs', () => fake.heartbeats.length >= before + 3);
    expect(fake.heartbeats.at(-1)!.body).toMatchObject({ current_load: 1, queue_length: 0 });
    expect(fake.heartbeats.at(-1)!.auth).toBe(`Bearer ${node.token}`);
    release.open();
    await fake.until('ack', () => acks().length === 1);
  });

  it('reports health as the recent success ratio and the mean latency', async () => {
    const node = makeNode();
    node.handle('half', async (m) => {
      if (m.payload === 'fail') throw new Error('no');
      return 'yes';
    });
    await node.start();
    fake.deliver({ capability: 'half', payload: 'ok' });
    fake.deliver({ capability: 'half', payload: 'fail' });
    await fake.until('both answered', () => acks().length + rejects().length === 2);
    // one of two, weighed with ten successes' worth of trust (load.ts): 11 / 12
    await fake.until('a heartbeat with health 0.917', () => fake.heartbeats.find((h) => h.body.health === 0.917));
    expect(typeof fake.heartbeats.at(-1)!.body.avg_latency_ms).toBe('number');
  });

  it('counts a NonRetryableError (a final refusal of bad input) as the handler working, not against its health', async () => {
    const node = makeNode();
    node.handle('strict', async (m) => {
      if (!m.payload) throw new NonRetryableError('INVALID_ENVELOPE', 'payload is empty');
      if (m.payload === 'crash') throw new Error('bug');
      return 'ok';
    });
    await node.start();
    fake.deliver({ capability: 'strict', payload: null });
    fake.deliver({ capability: 'strict', payload: null });
    await fake.until('two refusals', () => rejects().length === 2);
    expect(rejects()[0]).toMatchObject({ code: 4101, retryable: false });
    expect(node.load().health).toBe(1);
    fake.deliver({ capability: 'strict', payload: 'crash' });
    await fake.until('the crash', () => rejects().length === 3);
    expect(node.load().health).toBe(0.923); // (2 + 10) / (3 + 10)
  });
});

describe('answers that need care', () => {
  it('refuses a result larger than 256 KiB with 4102 (it could not travel back), non-retryable', async () => {
    const node = makeNode();
    node.handle('huge', async () => 'x'.repeat(300 * 1024));
    await node.start();
    fake.deliver({ capability: 'huge' });
    await fake.until('reject', () => rejects().length === 1);
    expect(rejects()[0]).toMatchObject({ code: 4102, retryable: false });
    expect(results()).toHaveLength(0);
  });

  it('sends a bytes result as payload_b64 labelled application/octet-stream', async () => {
    const node = makeNode();
    node.handle('bytes', async () => Buffer.from([1, 2, 3]));
    await node.start();
    fake.deliver({ capability: 'bytes' });
    await fake.until('result', () => results().length === 1);
    expect(results()[0]).toMatchObject({ payload_b64: 'AQID', content_type: 'application/octet-stream' });
    expect(results()[0]).not.toHaveProperty('payload');
  });

  it('rejects a direct message it has no handler for as final; acks a late task_result and any receipt', async () => {
    const node = makeNode();
    const receipts: unknown[] = [];
    node.on('receipt', (r) => receipts.push(r));
    await node.start();
    const direct = newMessageId();
    fake.deliver({ message_id: direct, target_agent_id: node.agentId, message_type: 'note' });
    await fake.until('reject', () => rejects().length === 1);
    expect(rejects()[0]).toMatchObject({ message_id: direct, code: 3003, retryable: false });
    fake.deliver({ message_type: 'task_result', target_agent_id: node.agentId, correlation_id: newMessageId(), payload: 'too late' });
    const about = newMessageId();
    fake.deliver({
      message_type: 'reach.receipt',
      target_agent_id: node.agentId,
      correlation_id: about,
      payload: { message_id: about, status: 'REJECTED', code: 2001, name: 'NO_ROUTE', reason: 'nobody' },
    });
    await fake.until('two acks', () => acks().length === 2);
    expect(receipts).toEqual([expect.objectContaining({ message_id: about, code: 2001, name: 'NO_ROUTE', status: 'REJECTED' })]);
  });
});

describe('redelivery dedupe (R-G2)', () => {
  it('does not run a redelivered message twice: re-acks and re-sends the earlier result', async () => {
    const node = makeNode();
    let runs = 0;
    node.handle('count', async () => ({ run: ++runs }));
    await node.start();
    const id = newMessageId();
    const s1 = fake.deliver({ message_id: id, capability: 'count' });
    await fake.until('first ack', () => acks().length === 1);
    const s2 = fake.deliver({ message_id: id, capability: 'count' }, { attempt: 1 });
    await fake.until('second ack', () => acks().length === 2);
    expect(runs).toBe(1);
    expect(acks().map((a) => a.seq)).toEqual([s1, s2]);
    expect(results().map((r) => r.payload)).toEqual([{ run: 1 }, { run: 1 }]);
  });

  it('dedupes by idempotency key across message ids, answering each message id', async () => {
    const node = makeNode();
    let runs = 0;
    node.handle('pay', async () => ({ charged: ++runs }));
    await node.start();
    const a = newMessageId();
    const b = newMessageId();
    const sa = fake.deliver({ message_id: a, capability: 'pay', idempotency_key: 'order-7', producer: 'shop' });
    await fake.until('first ack', () => acks().length === 1);
    const sb = fake.deliver({ message_id: b, capability: 'pay', idempotency_key: 'order-7', producer: 'shop' });
    await fake.until('second ack', () => acks().length === 2);
    expect(runs).toBe(1);
    expect(results()).toEqual([
      { type: 'result', message_id: a, seq: sa, status: 'ok', payload: { charged: 1 } },
      { type: 'result', message_id: b, seq: sb, status: 'ok', payload: { charged: 1 } },
    ]);
  });

  it('answers a redelivery that arrives while the first run is still going once that run ends', async () => {
    const node = makeNode();
    const release = gate();
    let runs = 0;
    node.handle('slow', async () => {
      runs++;
      await release.promise;
      return 'r';
    });
    await node.start();
    const id = newMessageId();
    const s1 = fake.deliver({ message_id: id, capability: 'slow' });
    await fake.until('running', () => runs === 1);
    const s2 = fake.deliver({ message_id: id, capability: 'slow' }, { attempt: 1 });
    await new Promise((r) => setTimeout(r, 100));
    expect(acks()).toHaveLength(0);
    release.open();
    await fake.until('two acks', () => acks().length === 2);
    expect(runs).toBe(1);
    expect(
      acks()
        .map((a) => a.seq)
        .sort(),
    ).toEqual([s1, s2].sort());
  });

  it('re-rejects a final refusal without running again, but runs a retryable failure again', async () => {
    const node = makeNode();
    let strictRuns = 0;
    let flakyRuns = 0;
    node.handle('strict', async () => {
      strictRuns++;
      throw new NonRetryableError('AGENT_REJECTED', 'never');
    });
    node.handle('flaky', async () => {
      flakyRuns++;
      if (flakyRuns === 1) throw new Error('transient');
      return 'second time lucky';
    });
    await node.start();
    const s = newMessageId();
    const f = newMessageId();
    fake.deliver({ message_id: s, capability: 'strict' });
    fake.deliver({ message_id: f, capability: 'flaky' });
    await fake.until('two rejects', () => rejects().length === 2);
    fake.deliver({ message_id: s, capability: 'strict' }, { attempt: 1 });
    fake.deliver({ message_id: f, capability: 'flaky' }, { attempt: 1 });
    await fake.until('third reject and an ack', () => rejects().length === 3 && acks().length === 1);
    expect(strictRuns).toBe(1);
    expect(flakyRuns).toBe(2);
    expect(rejects()[2]).toMatchObject({ message_id: s, code: 3003, retryable: false });
  });
});

describe('session context (R-G3)', () => {
  it('gives the handler the fragments from reach-context-* headers and returns the ones it set', async () => {
    const node = makeNode();
    node.handle('plan', async (_m, ctx) => {
      const user = ctx.session.getJson<{ name: string }>('user');
      ctx.session.set('plan', `plan for ${user?.name ?? '?'}`);
      expect(ctx.session.id).toBe('s-1');
      return 'planned';
    });
    await node.start();
    fake.deliver({ capability: 'plan', session_id: 's-1', headers: { 'reach-context-user': '{"name":"Ada"}', unrelated: 'x' } });
    await fake.until('result', () => results().length === 1);
    expect(results()[0]).toMatchObject({ status: 'ok', payload: 'planned', headers: { 'reach-context-plan': 'plan for Ada' } });
  });
});

describe('connection', () => {
  it('answers server pings with pongs and pings on its own', async () => {
    const node = makeNode({ pingIntervalMs: 100 });
    await node.start();
    fake.sendRaw({ type: 'ping', ts: 12345 });
    await fake.until('pong', () => fake.framesOf('pong').find((p) => p.ts === 12345));
    await fake.until('two own pings', () => fake.framesOf('ping').length >= 2);
  });

  it('reconnects after a drop with last_seq and sends the ack of work finished meanwhile', async () => {
    const node = makeNode();
    const release = gate();
    node.handle('job', async () => {
      await release.promise;
      return 'finished offline';
    });
    await node.start();
    const id = newMessageId();
    const seq = fake.deliver({ message_id: id, capability: 'job' }, { seq: 41 });
    await fake.until('running', () => node.load().current_load === 1);
    fake.socket!.terminate();
    await fake.until('disconnected', () => !node.connected);
    release.open();
    await fake.until('second hello', () => fake.hellos.length === 2);
    expect(fake.hellos[1]).toMatchObject({ agent_id: node.agentId, last_seq: 41 });
    await fake.until('ack after reconnect', () => fake.frames.find((f) => f.frame.type === 'ack' && f.socket === fake.hellos[1]!.socket));
    expect(acks()).toEqual([{ type: 'ack', seq, message_id: id }]);
  });

  it('keeps retrying with backoff while the dispatcher is away', async () => {
    const node = makeNode({ reconnect: { baseMs: 20, maxMs: 80 } });
    await node.start();
    const server = (fake as unknown as { wss: import('ws').WebSocketServer }).wss;
    const handlers = server.listeners('connection');
    server.removeAllListeners('connection');
    let refused = 0;
    server.on('connection', (ws) => {
      refused++;
      ws.terminate();
    });
    fake.socket!.terminate();
    await fake.until('three refused attempts', () => refused >= 3);
    server.removeAllListeners('connection');
    for (const h of handlers) server.on('connection', h as (ws: import('ws').WebSocket) => void);
    await fake.until('reconnected', () => fake.hellos.length === 2 && node.connected);
  });

  it('on 4001 (a newer connection took the agent) stops for good: no reconnect, no deregistration, run() rejects with AgentReplacedError', async () => {
    const node = makeNode();
    await node.start();
    const replaced: string[] = [];
    node.on('replaced', (r) => replaced.push(r.agent_id));
    fake.socket!.close(4001, 'replaced by a newer connection');
    await expect(node.run()).rejects.toBeInstanceOf(AgentReplacedError);
    expect(node.status).toBe('stopped');
    expect(node.replaced).toBe(true);
    expect(replaced).toEqual([node.agentId]);
    expect(fake.deregistrations).toEqual([]);
    const beats = fake.heartbeats.length;
    // Several reconnect backoffs (20–100 ms here) later: still one connection, no heartbeat.
    await new Promise((r) => setTimeout(r, 400));
    expect(fake.hellos).toHaveLength(1);
    expect(fake.heartbeats).toHaveLength(beats);
  });

  it('a 4001 caused by its own new connection (re-registering while connected) is no takeover: it stays running', async () => {
    fake.closeOlderOnHello = true;
    const node = makeNode();
    await node.start();
    const disconnects: number[] = [];
    node.on('disconnected', (d) => disconnects.push(d.code));
    let connected = 0;
    node.on('connected', () => connected++);
    fake.heartbeatStatus = 410; // the lease is gone: re-register and reconnect with the old socket open
    await fake.until('re-registered and reconnected', () => fake.registrations.length === 2 && connected === 1 && node.connected);
    fake.heartbeatStatus = 204;
    // The old connection was closed with 4001 while the new one waited for its welcome.
    expect(disconnects).toEqual([4001]);
    expect(node.status).toBe('running');
    expect(node.replaced).toBe(false);
  });

  it('re-registers under the same agent id when the dispatcher closes with 4003', async () => {
    const node = makeNode();
    await node.start();
    const id = node.agentId;
    fake.socket!.close(4003, 'token revoked');
    await fake.until('re-registered and reconnected', () => fake.registrations.length === 2 && fake.hellos.length === 2);
    expect(fake.registrations[1]!.body.agent_id).toBe(id);
    expect(fake.hellos[1]!.token).toBe(fake.registrations[1]!.token);
  });

  it('re-registers with its own token first and falls back to the configured token when that is refused', async () => {
    const node = makeNode();
    await node.start();
    const own = node.token;
    fake.socket!.close(4003, 'token revoked');
    await fake.until('re-registered', () => fake.registrations.length === 2 && fake.hellos.length === 2);
    expect(fake.registrations[1]!.auth).toBe(`Bearer ${own}`);
    fake.refuseAgentTokens = true;
    fake.socket!.close(4003, 'token revoked');
    await fake.until('refused, then registered with the enrollment token', () => fake.registrations.length === 4 && fake.hellos.length === 3);
    expect(fake.registrations.slice(2).map((r) => r.auth)).toEqual([`Bearer ${fake.registrations[1]!.token}`, 'Bearer enroll-token']);
    expect(fake.registrations[3]!.body.agent_id).toBe(node.agentId);
  });

  it('re-registers when a heartbeat is refused', async () => {
    const node = makeNode();
    await node.start();
    fake.heartbeatStatus = 401;
    await fake.until('re-registered', () => fake.registrations.length >= 2);
    fake.heartbeatStatus = 204;
    expect(fake.registrations[1]!.body.agent_id).toBe(node.agentId);
  });

  it('renews its token before expiry on the open connection (refresh_token), without reconnecting or losing a delivery', async () => {
    fake.tokenTtlS = 2;
    const node = makeNode();
    const connections: string[] = [];
    node.on('connected', (c) => connections.push(c.connection_id));
    const release = gate();
    node.handle('long', async () => {
      await release.promise;
      return 'across the renewal';
    });
    await node.start();
    const firstToken = node.token;
    const id = newMessageId();
    const seq = fake.deliver({ message_id: id, capability: 'long' });
    await fake.until('running', () => node.load().current_load === 1);
    fake.tokenTtlS = 3600;
    const renewal = await fake.until('the new token sent on the open connection', () => fake.framesOf('refresh_token')[0], 5000);
    expect(fake.registrations[1]!.body.agent_id).toBe(node.agentId);
    expect(node.token).not.toBe(firstToken);
    expect(renewal).toEqual({ type: 'refresh_token', token: node.token });
    expect(fake.frames.find((f) => f.frame.type === 'refresh_token')!.socket).toBe(fake.hellos[0]!.socket);
    release.open();
    await fake.until('ack on the same connection', () => fake.frames.find((f) => f.frame.type === 'ack' && f.socket === fake.hellos[0]!.socket));
    expect(acks()).toEqual([{ type: 'ack', seq, message_id: id }]);
    expect(fake.hellos).toHaveLength(1);
    expect(connections).toHaveLength(1);
  });
});

describe('sending', () => {
  it('send() resolves with the accepted message id', async () => {
    const node = makeNode();
    await node.start();
    const id = await node.send({ capability: 'x', payload: { a: 1 }, idempotency_key: 'k1' });
    const frame = fake.framesOf('send')[0]!;
    expect(frame).toMatchObject({ capability: 'x', payload: { a: 1 }, idempotency_key: 'k1', producer: node.agentId, message_id: id });
    expect(typeof frame.client_ref).toBe('string');
  });

  it('send() rejects with the code of an error frame, and refuses a message with two targets', async () => {
    const node = makeNode();
    await node.start();
    fake.sendError = { code: 4129, name: 'RATE_LIMITED', message: 'over quota' };
    const err = await node.send({ capability: 'x', payload: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ReachError);
    expect(err).toMatchObject({ code: 4129, retryable: true });
    await expect(node.send({ capability: 'x', topic: 't' })).rejects.toMatchObject({ code: 4101 });
  });

  it('publish() sends an event to a topic; bytes travel as payload_b64', async () => {
    const node = makeNode();
    await node.start();
    await node.publish('orders.created', { id: 1 });
    await node.send({ target_agent_id: 'someone', payload: Buffer.from('raw bytes') });
    const [ev, bin] = fake.framesOf('send');
    expect(ev).toMatchObject({ topic: 'orders.created', message_type: 'event', payload: { id: 1 } });
    expect(bin).toMatchObject({
      target_agent_id: 'someone',
      payload_b64: Buffer.from('raw bytes').toString('base64'),
      content_type: 'application/octet-stream',
    });
    expect(bin).not.toHaveProperty('payload');
  });

  it('request() checks the registry first and fails fast with 2001 when nobody offers the capability', async () => {
    const node = makeNode();
    await node.start();
    fake.agentsByCapability.set('ghost', [{ agent_id: 'x', status: 'OFFLINE' }]);
    const err = await node.request('ghost', {}).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 2001, retryable: false });
    expect(fake.framesOf('send')).toHaveLength(0);
    expect(fake.agentQueries.at(-1)).toEqual({ capability: 'ghost', auth: `Bearer ${node.token}` });
    expect(await node.canReach('ghost')).toBe(false);
  });

  it('request() resolves with the task_result correlated to it, merging context fragments; the reply never reaches handlers', async () => {
    const node = makeNode();
    let handled = 0;
    node.onDirect(async () => {
      handled++;
    });
    await node.start();
    fake.agentsByCapability.set('translate', [{ agent_id: 'tr.1', status: 'ONLINE' }]);
    const pending = node.requestReply<{ text: string }>('translate', { text: 'hallo' }, { timeoutMs: 5000, context: { lang: 'de' }, sessionId: 's9' });
    const req = await fake.until('send frame', () => fake.framesOf('send')[0]);
    expect(req).toMatchObject({
      capability: 'translate',
      message_type: 'task_request',
      reply_to: node.agentId,
      session_id: 's9',
      timeout_ms: 5000,
      headers: { 'reach-context-lang': 'de' },
    });
    const seq = fake.deliver({
      message_type: 'task_result',
      target_agent_id: node.agentId,
      correlation_id: req.message_id,
      payload: { text: 'hello' },
      headers: { 'reach-context-glossary': 'v2' },
    });
    const reply = await pending;
    expect(reply.payload).toEqual({ text: 'hello' });
    expect(reply.context).toEqual({ lang: 'de', glossary: 'v2' });
    expect(reply.updated).toEqual({ glossary: 'v2' });
    await fake.until('reply acked', () => acks().find((a) => a.seq === seq));
    expect(handled).toBe(0);
  });

  it('request() rejects with 3002 when no result comes in time', async () => {
    const node = makeNode();
    await node.start();
    const err = await node.request('slowcap', 1, { timeoutMs: 150, preflight: false }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 3002, codeName: 'ACK_TIMEOUT' });
  });

  it('request() rejects with the code of a failure receipt, and emits the receipt', async () => {
    const node = makeNode();
    const receipts: unknown[] = [];
    node.on('receipt', (r) => receipts.push(r));
    await node.start();
    const pending = node.request('doomed', 1, { timeoutMs: 5000, preflight: false });
    const req = await fake.until('send frame', () => fake.framesOf('send')[0]);
    fake.deliver({
      message_type: 'reach.receipt',
      producer: 'reach',
      target_agent_id: node.agentId,
      correlation_id: req.message_id,
      payload: { message_id: req.message_id, status: 'DEAD', code: 3004, name: 'RETRIES_EXHAUSTED', reason: 'every attempt failed' },
    });
    await expect(pending).rejects.toMatchObject({ code: 3004, codeName: 'RETRIES_EXHAUSTED' });
    expect(receipts).toEqual([expect.objectContaining({ message_id: req.message_id, code: 3004, status: 'DEAD' })]);
  });
});

describe('stop', () => {
  it('finishes running handlers, hands queued work back, deregisters and closes', async () => {
    const node = makeNode({ descriptor: { agent_type: 't', metadata: { max_concurrency: 1 } } });
    const release = gate();
    node.handle('job', async () => {
      await release.promise;
      return 'done';
    });
    await node.start();
    const running = newMessageId();
    const queued = newMessageId();
    fake.deliver({ message_id: running, capability: 'job' });
    fake.deliver({ message_id: queued, capability: 'job' });
    await fake.until('running', () => node.load().current_load === 1);
    const stopped = node.stop({ drainTimeoutMs: 5000 });
    await fake.until('queued one handed back', () => rejects().length === 1);
    // 2002 (SATURATED): a hand-back, which the dispatcher retries without counting it against the circuit
    expect(rejects()[0]).toMatchObject({ message_id: queued, code: 2002, retryable: true });
    // New deliveries during the drain are handed back too.
    const late = newMessageId();
    fake.deliver({ message_id: late, capability: 'job' });
    await fake.until('late one handed back', () => rejects().length === 2);
    expect(rejects()[1]).toMatchObject({ message_id: late, code: 2002, retryable: true });
    expect(fake.deregistrations).toHaveLength(0);
    release.open();
    await stopped;
    expect(acks()).toEqual([expect.objectContaining({ message_id: running })]);
    expect(fake.deregistrations).toEqual([{ agent_id: node.agentId, auth: `Bearer ${node.token}` }]);
    await fake.until('socket closed', () => fake.socket!.readyState === fake.socket!.CLOSED);
    expect(node.status).toBe('stopped');
    await expect(node.send({ capability: 'x' })).rejects.toMatchObject({ code: 1002 });
  });

  it('gives up on a handler that outlives the drain timeout and aborts its signal', async () => {
    const node = makeNode();
    let aborted = false;
    node.handle('forever', async (_m, ctx) => {
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
      aborted = ctx.signal.aborted;
      return 'late';
    });
    await node.start();
    fake.deliver({ capability: 'forever' });
    await fake.until('running', () => node.load().current_load === 1);
    await node.stop({ drainTimeoutMs: 100 });
    expect(aborted).toBe(true);
    expect(fake.deregistrations).toHaveLength(1);
  });
});
