import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { signToken } from '@reach/core';
import { createPgPool, type Pool } from '@reach/store';
import { stack, tokenSecret } from '../../helpers/env.js';
import { plainKafka, registryClient, TopicTap } from '../../helpers/kafka.js';
import { agentId, agentToken, startInstance, TestAgent, type Instance } from './harness.js';

// The connection half of docs/design.md §4 against the running dispatcher (and one extra instance with
// small limits): hello/welcome with either way of authenticating, 4003 for every auth failure,
// 4001 for the older of two connections, 4008 for silence, 4013 for an oversized frame,
// ping/pong, and presence on reach.presence.v1.
const kafka = plainKafka();
let presence: TopicTap<Record<string, unknown>>;
let tight: Instance;
let pg: Pool;
const revokedJtis: string[] = [];

beforeAll(async () => {
  pg = createPgPool(stack.databaseUrl);
  presence = await new TopicTap<Record<string, unknown>>(kafka, 'reach.presence.v1', registryClient()).open();
  tight = await startInstance({ REACH_WS_IDLE_TIMEOUT_MS: '1000', REACH_WS_PING_INTERVAL_MS: '300', REACH_WS_AUTH_TIMEOUT_MS: '500' });
});

afterAll(async () => {
  if (revokedJtis.length > 0) await pg.query('DELETE FROM revoked_tokens WHERE jti = ANY($1)', [revokedJtis]);
  await Promise.all([presence?.close(), tight?.stop(), pg?.end()]);
});

describe('dispatcher: connecting', () => {
  it('welcomes an agent that authenticates in its hello frame', async () => {
    const id = agentId();
    const { agent, welcome } = await TestAgent.connect(id);
    expect(welcome).toMatchObject({ type: 'welcome', heartbeat_ms: 15000, resume_from: 0 });
    expect(welcome.connection_id).toMatch(/^conn_[0-9A-Z]{26}$/);
    await agent.close();
  });

  it('welcomes an agent that authenticates with the Authorization header (hello still first)', async () => {
    const id = agentId();
    const { agent, welcome } = await TestAgent.connect(id, { headerAuth: true });
    expect(welcome.type).toBe('welcome');
    await agent.close();
  });

  it('closes with 4003 and an AUTH_FAILED error frame for a bad token', async () => {
    const id = agentId();
    const agent = await TestAgent.open();
    agent.send({ type: 'hello', agent_id: id, token: agentToken(id, { secret: 'not-the-secret-of-this-stack' }) });
    const closed = await agent.closed;
    expect(closed.code).toBe(4003);
    expect(agent.frames).toEqual([expect.objectContaining({ type: 'error', code: 1003, name: 'AUTH_FAILED' })]);
  });

  it('closes with 4003 when hello names another agent than the token', async () => {
    const agent = await TestAgent.open();
    agent.send({ type: 'hello', agent_id: agentId(), token: agentToken(agentId()) });
    expect((await agent.closed).code).toBe(4003);
    expect(agent.frames[0]).toMatchObject({ type: 'error', code: 1003, message: expect.stringMatching(/not the token's agent/) });
  });

  it('closes with 4003 an expired token', async () => {
    const id = agentId();
    const agent = await TestAgent.open();
    agent.send({ type: 'hello', agent_id: id, token: agentToken(id, { ttlS: -10 }) });
    expect((await agent.closed).code).toBe(4003);
    expect(agent.frames[0]).toMatchObject({ type: 'error', name: 'AUTH_FAILED', message: 'token expired' });
  });

  it('closes with 4003 a revoked token', async () => {
    const id = agentId();
    const now = Math.floor(Date.now() / 1000);
    const jti = `tok_${ulid()}`;
    const token = signToken({ sub: id, jti, iat: now, exp: now + 600, dom: 'default' }, tokenSecret());
    revokedJtis.push(jti);
    await pg.query("INSERT INTO revoked_tokens (jti, agent_id, expires_at) VALUES ($1, $2, now() + interval '10 minutes')", [jti, id]);
    const agent = await TestAgent.open();
    agent.send({ type: 'hello', agent_id: id, token });
    expect((await agent.closed).code).toBe(4003);
    expect(agent.frames[0]).toMatchObject({ type: 'error', name: 'AUTH_FAILED', message: 'token revoked' });
  });

  it('closes with 4003 when the first frame is not hello', async () => {
    const id = agentId();
    const agent = await TestAgent.open(undefined, { authorization: `Bearer ${agentToken(id)}` });
    agent.send({ type: 'ping', ts: 1 });
    expect((await agent.closed).code).toBe(4003);
  });

  it('closes with 4003 a socket that sends no hello within REACH_WS_AUTH_TIMEOUT_MS', async () => {
    const agent = await TestAgent.open(tight.ws);
    const closed = await agent.closed;
    expect(closed.code).toBe(4003);
    expect(agent.frames[0]).toMatchObject({ type: 'error', name: 'AUTH_FAILED', message: expect.stringMatching(/no hello/) });
  });

  it('answers ping with pong carrying the same ts', async () => {
    const { agent } = await TestAgent.connect(agentId());
    agent.send({ type: 'ping', ts: 12345 });
    expect(await agent.next((f) => f.type === 'pong')).toEqual({ type: 'pong', ts: 12345 });
    await agent.close();
  });

  it('answers an unknown frame with a 4101 error and keeps the connection', async () => {
    const { agent } = await TestAgent.connect(agentId());
    agent.send({ type: 'bogus' });
    expect(await agent.next((f) => f.type === 'error')).toMatchObject({ code: 4101, name: 'INVALID_ENVELOPE' });
    agent.send({ type: 'ping', ts: 7 });
    await agent.next((f) => f.type === 'pong');
    await agent.close();
  });

  it('closes the older of two connections of one agent with 4001', async () => {
    const id = agentId();
    const first = await TestAgent.connect(id);
    const second = await TestAgent.connect(id);
    expect((await first.agent.closed).code).toBe(4001);
    expect(second.agent.ws.readyState).toBe(second.agent.ws.OPEN);
    second.agent.send({ type: 'ping', ts: 1 });
    await second.agent.next((f) => f.type === 'pong');
    await second.agent.close();
  });

  it('keeps exactly one of two simultaneous connections of one agent', async () => {
    const id = agentId();
    const [a, b] = await Promise.all([TestAgent.open(), TestAgent.open()]);
    a.send({ type: 'hello', agent_id: id, token: agentToken(id) });
    b.send({ type: 'hello', agent_id: id, token: agentToken(id) });
    const first = await Promise.race([a.closed.then((c) => ({ loser: a, winner: b, c })), b.closed.then((c) => ({ loser: b, winner: a, c }))]);
    expect(first.c.code).toBe(4001);
    first.winner.send({ type: 'ping', ts: 3 });
    await first.winner.next((f) => f.type === 'pong');
    expect(first.winner.frames.some((f) => f.type === 'welcome')).toBe(true);
    await first.winner.close();
  });

  it('closes the older connection with 4001 when the newer one is on another instance', async () => {
    const id = agentId();
    const first = await TestAgent.connect(id);
    const second = await TestAgent.connect(id, { url: tight.ws });
    expect((await first.agent.closed).code).toBe(4001);
    second.agent.send({ type: 'ping', ts: 1 });
    await second.agent.next((f) => f.type === 'pong');
    await second.agent.close();
  });

  it('pings a connected agent and closes it with 4008 when it stays silent', async () => {
    const { agent, welcome } = await TestAgent.connect(agentId(), { url: tight.ws });
    expect(welcome.heartbeat_ms).toBe(300);
    const closed = await agent.closed;
    expect(closed.code).toBe(4008);
    expect(agent.frames.some((f) => f.type === 'ping' && typeof f.ts === 'number')).toBe(true);
    expect(agent.frames.at(-1)).toMatchObject({ type: 'error', name: 'HEARTBEAT_TIMEOUT' });
  });

  it('keeps a connection that answers pings past the idle timeout', async () => {
    const { agent } = await TestAgent.connect(agentId(), { url: tight.ws });
    agent.ws.on('message', (data) => {
      const f = JSON.parse(data.toString()) as { type: string; ts: number };
      if (f.type === 'ping') agent.send({ type: 'pong', ts: f.ts });
    });
    // Three idle timeouts' worth of pings, answered: still open.
    await agent.waitCount((f) => f.type === 'ping', 10);
    expect(agent.ws.readyState).toBe(agent.ws.OPEN);
    await agent.close();
  });

  it('closes with 4013 on a frame over REACH_WS_MAX_FRAME_BYTES (512 KiB)', async () => {
    const { agent } = await TestAgent.connect(agentId());
    agent.send({ type: 'send', client_ref: 'big', capability: 'x', payload: 'a'.repeat(600 * 1024) });
    expect((await agent.closed).code).toBe(4013);
  });

  it('publishes presence on connect and on disconnect', async () => {
    const id = agentId();
    const { agent, welcome } = await TestAgent.connect(id);
    const up = await presence.waitFor((r) => r.key === id && r.value?.connected === true);
    expect(up.value).toMatchObject({ agent_id: id, connection_id: welcome.connection_id, dispatcher_instance: expect.any(String) });
    await agent.close();
    const down = await presence.waitFor((r) => r.key === id && r.value?.connected === false);
    expect(down.value).toMatchObject({ agent_id: id, connection_id: welcome.connection_id });
  });
});
