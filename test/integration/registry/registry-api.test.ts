import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signToken, silentLogger, verifyToken } from '@reach/core';
import { createRedis, type Redis } from '@reach/store';
import { adminToken, stack, uniq, urls } from '../../helpers/env.js';
import { plainKafka, TopicTap, type Tapped } from '../../helpers/kafka.js';
import { call, capWord, eventually, getAgent, listAgents, register, sleep, tokenSecret, type AgentJson } from './helpers.js';

// The registry's agent API (docs/design.md §3, R-A1…R-A6) against the running stack: real
// HTTP on 7411, real Redis, every change checked on the real reach.agents.v1.
type FeedRecord = Record<string, unknown> & { agent_id: string; status: string; revision: number; capabilities: Array<{ name: string }> };

const kafka = plainKafka();
let feed: TopicTap<FeedRecord>;
let redis: Redis;
const admin = adminToken();
const secret = tokenSecret();

beforeAll(async () => {
  feed = await new TopicTap<FeedRecord>(kafka, 'reach.agents.v1').open();
  redis = createRedis(stack.redisUrl, silentLogger);
});

afterAll(async () => {
  await feed?.close();
  await redis?.quit();
});

function feedOf(id: string): Array<Tapped<FeedRecord>> {
  return feed.records.filter((r) => r.key === id);
}

function descriptor(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    agent_id: uniq('it.registry'),
    agent_type: 'it.registry',
    endpoints: { ws: 'ws://127.0.0.1:7412/v1/connect', protocol_version: '1' },
    capabilities: [{ name: `parse_${capWord()}`, mode: 'handle', tags: ['it'], scope: { access: 'read' }, consumption: 'single' }],
    metadata: { max_concurrency: 4, region: 'eu', timezone: 'UTC', model: 'none', domain: 'default' },
    ttl_s: 30,
    ...overrides,
  };
}

describe('POST /v1/agents (register)', () => {
  it('registers an agent: 201 with lease, a working token, TTL/2 heartbeats; the record is on reach.agents.v1', async () => {
    const cap = `parse_${capWord()}`;
    const body = descriptor({ capabilities: [{ name: cap, mode: 'handle', tags: ['risk'], scope: { sources: ['s3'] } }], ttl_s: 20 });
    const reg = await register(body, null);
    expect(reg).toMatchObject({ agent_id: body.agent_id, ttl_s: 20, heartbeat_interval_ms: 10_000 });
    expect(reg.lease_id).toMatch(/^lease_/);
    const claims = verifyToken(reg.token, secret);
    expect(claims).toMatchObject({ sub: body.agent_id, dom: 'default' });
    expect(claims.exp - claims.iat).toBe(3600);

    const got = await getAgent(reg.agent_id);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      agent_id: body.agent_id,
      agent_type: 'it.registry',
      status: 'ONLINE',
      lease_id: reg.lease_id,
      lease_valid: true,
      ttl_s: 20,
      qos: 1,
      capabilities: [{ name: cap, mode: 'handle', tags: ['risk'], consumption: 'single', scope: { sources: ['s3'] }, version: null }],
      metadata: { max_concurrency: 4, region: 'eu', domain: 'default' },
      load: { current_load: 0, load_rate: 0 },
    });
    expect(got.body.lease_expires_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(got.body.lease_expires_at) - Date.parse(got.body.updated_at)).toBe(20_000);

    const rec = await feed.waitFor((r) => r.key === reg.agent_id && r.value?.status === 'ONLINE');
    expect(rec.value).toMatchObject({ agent_id: reg.agent_id, status: 'ONLINE', lease_id: reg.lease_id, ttl_s: 20, qos: 1 });
    expect(rec.value!.capabilities.map((c) => c.name)).toEqual([cap]);
    expect(rec.value!.revision).toBe(got.body.revision);
  });

  it('generates <agent_type>.<6 hex> when agent_id is absent, and accepts an agent with no capabilities', async () => {
    const reg = await register({ agent_type: 'it.producer', metadata: { max_concurrency: 1 } }, null);
    expect(reg.agent_id).toMatch(/^it\.producer\.[0-9a-f]{6}$/);
    expect(reg.heartbeat_interval_ms).toBe(30_000); // REACH_AGENT_TTL_S default 60
    expect((await getAgent(reg.agent_id)).body.capabilities).toEqual([]);
    await call('DELETE', `/v1/agents/${reg.agent_id}`, { token: reg.token });
  });

  it.each<[string, (c: string) => Record<string, unknown>, string]>([
    [
      'a name that breaks the grammar',
      (c) => ({ capabilities: [{ name: `parse_${c}` }, { name: `query:${c}` }, { name: 'Parse-PDF' }] }),
      'capabilities[2].name',
    ],
    ['a vague name', (c) => ({ capabilities: [{ name: `parse_${c}` }, { name: 'process' }] }), 'capabilities[1].name'],
    ['a duplicate name', (c) => ({ capabilities: [{ name: `parse_${c}` }, { name: `parse_${c}`, mode: 'subscribe' }] }), 'capabilities[1].name'],
    ['more than REACH_MAX_CAPABILITIES (10)', (c) => ({ capabilities: Array.from({ length: 11 }, (_, i) => ({ name: `parse_${c}_${i}` })) }), 'capabilities'],
    ['max_concurrency 0', () => ({ metadata: { max_concurrency: 0 } }), 'metadata.max_concurrency'],
    ['a bad mode', (c) => ({ capabilities: [{ name: `parse_${c}`, mode: 'sometimes' }] }), 'capabilities[0].mode'],
    ['no agent_type', () => ({ agent_type: undefined }), 'agent_type'],
  ])('refuses %s with 400 / 4104 naming the field', async (_what, change, field) => {
    const body = descriptor(change(capWord()));
    const res = await call<{ error: { code: number; name: string; message: string; details: { field: string } } }>('POST', '/v1/agents', {
      body,
      token: admin,
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 4104, name: 'INVALID_REGISTRATION', details: { field } });
    expect(res.body.error.message).toContain(field);
    expect((await getAgent(body.agent_id as string)).status).toBe(404);
  });

  it('refuses malformed JSON with 4104', async () => {
    const res = await call<{ error: { code: number } }>('POST', '/v1/agents', { raw: '{"agent_type": ', token: admin });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe(4104);
  });

  it('keeps ids from being hijacked: re-registering an existing id needs its own token or the admin token (401 otherwise)', async () => {
    const body = descriptor();
    const first = await register(body, null);
    const other = await register(descriptor(), null);

    const anonymous = await call<{ error: { code: number } }>('POST', '/v1/agents', { body });
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.error.code).toBe(1003);
    const foreign = await call<{ error: { code: number } }>('POST', '/v1/agents', { body, token: other.token });
    expect(foreign.status).toBe(401);
    const garbage = await call<{ error: { code: number } }>('POST', '/v1/agents', { body, token: 'rt1.garbage.token' });
    expect(garbage.status).toBe(401);
    expect((await getAgent(first.agent_id)).body.lease_id).toBe(first.lease_id);

    const own = await register(body, first.token);
    expect(own.lease_id).not.toBe(first.lease_id);
    const byAdmin = await register(body, admin);
    expect((await getAgent(first.agent_id)).body.lease_id).toBe(byAdmin.lease_id);
  });
});

describe('agent tokens', () => {
  it('work until they expire, then are refused with 401 / 1003', async () => {
    const reg = await register(descriptor(), null);
    const iat = Math.floor(Date.now() / 1000);
    const short = signToken({ sub: reg.agent_id, jti: uniq('tok'), iat, exp: iat + 2, dom: 'default' }, secret);
    const ok = await call('POST', `/v1/agents/${reg.agent_id}/heartbeat`, { body: { current_load: 1 }, token: short });
    expect(ok.status).toBe(200);
    await sleep((iat + 2) * 1000 - Date.now() + 200);
    const expired = await call<{ error: { code: number; message: string } }>('POST', `/v1/agents/${reg.agent_id}/heartbeat`, { body: {}, token: short });
    expect(expired.status).toBe(401);
    expect(expired.body.error).toMatchObject({ code: 1003 });
    expect(expired.body.error.message).toMatch(/expired/);
    const reRegister = await call('POST', '/v1/agents', { body: descriptor({ agent_id: reg.agent_id }), token: short });
    expect(reRegister.status).toBe(401);
    // A token signed with another secret is no token at all.
    const forged = signToken({ sub: reg.agent_id, jti: 'x', iat, exp: iat + 600, dom: 'default' }, 'some-other-secret-0123456789');
    expect((await call('POST', `/v1/agents/${reg.agent_id}/heartbeat`, { body: {}, token: forged })).status).toBe(401);
  });
});

describe('POST /v1/agents/{id}/heartbeat', () => {
  it('renews the lease and reports load, QoS and status; each heartbeat is on the feed', async () => {
    const reg = await register(descriptor({ ttl_s: 10 }), null);
    const before = (await getAgent(reg.agent_id)).body;
    await sleep(50);
    const hb = await call<{ lease_expires_at: string; status: string; qos: number }>('POST', `/v1/agents/${reg.agent_id}/heartbeat`, {
      body: { current_load: 2, queue_length: 3, avg_latency_ms: 120, health: 1 },
      token: reg.token,
    });
    expect(hb.status).toBe(200);
    expect(hb.body.status).toBe('ONLINE');
    // qos = 1 × (0.7 × (1 − 2/4) + 0.3 × 5000/5120)
    expect(hb.body.qos).toBeCloseTo(0.35 + (0.3 * 5000) / 5120, 5);
    expect(Date.parse(hb.body.lease_expires_at)).toBeGreaterThan(Date.parse(before.lease_expires_at));

    const after = (await getAgent(reg.agent_id)).body;
    expect(after).toMatchObject({ status: 'ONLINE', qos: hb.body.qos, lease_expires_at: hb.body.lease_expires_at });
    expect(after.load).toMatchObject({ current_load: 2, queue_length: 3, avg_latency_ms: 120, health: 1, load_rate: 0.5 });
    expect(after.revision).toBeGreaterThan(before.revision);
    const rec = await feed.waitFor((r) => r.key === reg.agent_id && r.value?.revision === after.revision);
    expect(rec.value).toMatchObject({ load: { current_load: 2, queue_length: 3, avg_latency_ms: 120, health: 1 }, qos: hb.body.qos });
  });

  it('enters COOLDOWN below REACH_COOLDOWN_QOS and returns to ONLINE above it, on the feed too', async () => {
    const reg = await register(descriptor(), null);
    // Health decides, not load: a full agent stays ONLINE (its work is held by the routers), one
    // that fails most of its work goes COOLDOWN (qos.ts statusForLoad).
    const full = await call<{ status: string; qos: number }>('POST', `/v1/agents/${reg.agent_id}/heartbeat`, {
      body: { current_load: 4, avg_latency_ms: 20_000, health: 0.9 },
      token: reg.token,
    });
    expect(full.body).toMatchObject({ status: 'ONLINE' });
    expect(full.body.qos).toBeLessThan(0.3);
    const down = await call<{ status: string; qos: number }>('POST', `/v1/agents/${reg.agent_id}/heartbeat`, {
      body: { current_load: 4, avg_latency_ms: 20_000, health: 0.3 },
      token: reg.token,
    });
    expect(down.body.status).toBe('COOLDOWN');
    expect(down.body.qos).toBeLessThan(0.3);
    expect((await getAgent(reg.agent_id)).body.status).toBe('COOLDOWN');
    await feed.waitFor((r) => r.key === reg.agent_id && r.value?.status === 'COOLDOWN');
    expect((await listAgents({ status: 'COOLDOWN' })).map((a) => a.agent_id)).toContain(reg.agent_id);

    const up = await call<{ status: string; qos: number }>('POST', `/v1/agents/${reg.agent_id}/heartbeat`, {
      body: { current_load: 0, avg_latency_ms: 50, health: 1 },
      token: reg.token,
    });
    expect(up.body.status).toBe('ONLINE');
    expect(up.body.qos).toBeGreaterThan(0.9);
    const online = await feed.waitFor((r) => r.key === reg.agent_id && r.value?.status === 'ONLINE' && (r.value.qos as number) > 0.9);
    expect(online.value!.load).toMatchObject({ current_load: 0, health: 1 });
  });

  it('lets an agent heartbeat only itself (401 for another agent, or without a token); unknown agents are 404', async () => {
    const a = await register(descriptor(), null);
    const b = await register(descriptor(), null);
    const foreign = await call<{ error: { code: number } }>('POST', `/v1/agents/${a.agent_id}/heartbeat`, { body: {}, token: b.token });
    expect(foreign.status).toBe(401);
    expect(foreign.body.error.code).toBe(1003);
    expect((await call('POST', `/v1/agents/${a.agent_id}/heartbeat`, { body: {} })).status).toBe(401);
    const gone = uniq('it.nobody');
    const unknown = await call<{ error: { code: number } }>('POST', `/v1/agents/${gone}/heartbeat`, { body: {}, token: admin });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe(2001);
  });

  it('refuses an invalid load report with 400 / 4104 naming the field', async () => {
    const reg = await register(descriptor(), null);
    const res = await call<{ error: { code: number; details: { field: string } } }>('POST', `/v1/agents/${reg.agent_id}/heartbeat`, {
      body: { current_load: -2 },
      token: reg.token,
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 4104, details: { field: 'current_load' } });
  });
});

describe('leases (R-A4)', () => {
  it('stays ONLINE while heartbeats come, and goes OFFLINE only after REACH_MISSED_HEARTBEATS missed ones', async () => {
    const reg = await register(descriptor({ ttl_s: 2 }), null);
    expect(reg.heartbeat_interval_ms).toBe(1000);
    // Heartbeat on time for three seconds: longer than the lease itself.
    const until = Date.now() + 3000;
    while (Date.now() < until) {
      const hb = await call<{ status: string }>('POST', `/v1/agents/${reg.agent_id}/heartbeat`, { body: { current_load: 0 }, token: reg.token });
      expect(hb.body.status).toBe('ONLINE');
      await sleep(reg.heartbeat_interval_ms * 0.6);
    }
    expect(feedOf(reg.agent_id).some((r) => r.value?.status === 'OFFLINE')).toBe(false);

    const last = (await getAgent(reg.agent_id)).body;
    const deadline = Date.parse(last.lease_expires_at);
    // The lease is REACH_MISSED_HEARTBEATS (2) heartbeat intervals from the last heartbeat.
    expect(deadline - Date.parse(last.updated_at)).toBe(2 * reg.heartbeat_interval_ms);
    const offline = await eventually(
      async () => (await getAgent(reg.agent_id)).body,
      (a) => a.status === 'OFFLINE',
      10_000,
      50,
    );
    expect(Date.parse(offline.updated_at)).toBeGreaterThanOrEqual(deadline);
    expect(offline.lease_valid).toBe(false);
    const rec = await feed.waitFor((r) => r.key === reg.agent_id && r.value?.status === 'OFFLINE');
    expect(rec.value!.revision).toBe(offline.revision);
    // Still listed (as OFFLINE) under its capability, and excluded from ONLINE listings.
    const cap = (offline as AgentJson).capabilities[0]!.name;
    expect((await listAgents({ capability: cap, status: 'OFFLINE' })).map((a) => a.agent_id)).toEqual([reg.agent_id]);
    expect(await listAgents({ capability: cap, status: 'ONLINE' })).toEqual([]);

    // A late heartbeat brings it back.
    const back = await call<{ status: string }>('POST', `/v1/agents/${reg.agent_id}/heartbeat`, { body: {}, token: reg.token });
    expect(back.body.status).toBe('ONLINE');
    await feed.waitFor((r) => r.key === reg.agent_id && r.value?.status === 'ONLINE' && r.value.revision > offline.revision);
    await call('DELETE', `/v1/agents/${reg.agent_id}`, { token: reg.token });
  });
});

describe('DELETE /v1/agents/{id}', () => {
  it('removes the agent at once: record, index entries, listing; a tombstone is on the feed', async () => {
    const cap = `parse_${capWord()}`;
    const reg = await register(descriptor({ capabilities: [{ name: cap }, { name: 'summarize@2' }] }), null);
    expect(await redis.sismember(`reach:cap:${cap}`, reg.agent_id)).toBe(1);
    expect(await redis.sismember('reach:cap:summarize@2', reg.agent_id)).toBe(1);

    const foreign = await register(descriptor(), null);
    expect((await call('DELETE', `/v1/agents/${reg.agent_id}`, { token: foreign.token })).status).toBe(401);
    expect((await call('DELETE', `/v1/agents/${reg.agent_id}`)).status).toBe(401);

    const res = await call('DELETE', `/v1/agents/${reg.agent_id}`, { token: reg.token });
    expect(res.status).toBe(200);
    expect((await getAgent(reg.agent_id)).status).toBe(404);
    expect(await listAgents({ capability: cap })).toEqual([]);
    expect(await redis.sismember(`reach:cap:${cap}`, reg.agent_id)).toBe(0);
    expect(await redis.sismember('reach:cap:summarize', reg.agent_id)).toBe(0);
    expect(await redis.sismember('reach:cap:summarize@2', reg.agent_id)).toBe(0);
    expect(await redis.exists(`reach:agent:${reg.agent_id}`)).toBe(0);
    expect(await redis.zscore('reach:leases', reg.agent_id)).toBeNull();
    const tombstone = await feed.waitFor((r) => r.key === reg.agent_id && r.raw === null);
    expect(tombstone.value).toBeUndefined();

    expect((await call('DELETE', `/v1/agents/${reg.agent_id}`, { token: admin })).status).toBe(404);
    // Deregistration revoked the agent's tokens; for the admin the agent is simply unknown.
    expect((await call('POST', `/v1/agents/${reg.agent_id}/heartbeat`, { body: {}, token: reg.token })).status).toBe(401);
    expect((await call('POST', `/v1/agents/${reg.agent_id}/heartbeat`, { body: {}, token: admin })).status).toBe(404);
  });

  it('lets the admin deregister any agent', async () => {
    const reg = await register(descriptor(), null);
    expect((await call('DELETE', `/v1/agents/${reg.agent_id}`, { token: admin })).status).toBe(200);
    expect((await getAgent(reg.agent_id)).status).toBe(404);
  });
});

describe('atomic re-registration (R-A3)', () => {
  it('many concurrent re-registrations with different capability sets leave exactly one consistent set, no stale index entry', async () => {
    const id = uniq('it.atomic');
    const w = capWord();
    const N = 24;
    const sets = Array.from({ length: N }, (_, i) => [`parse_${w}_only${i}`, `query:${w}_only${i}`, `index_${w}_shared`, ...(i % 2 ? [`merge_${w}_odd`] : [])]);
    await register(descriptor({ agent_id: id, capabilities: [{ name: `parse_${w}_initial` }] }));
    const results = await Promise.all(sets.map((caps) => register(descriptor({ agent_id: id, capabilities: caps.map((name) => ({ name })) }))));
    expect(new Set(results.map((r) => r.lease_id)).size).toBe(N);

    const final = (await getAgent(id)).body;
    const finalNames = final.capabilities.map((c) => c.name).sort();
    const winner = sets.findIndex((caps) => [...caps].sort().join() === finalNames.join());
    expect(winner, `final capabilities ${finalNames.join()} are none of the registered sets`).toBeGreaterThanOrEqual(0);
    expect(final.lease_id).toBe(results[winner]!.lease_id);

    const everyName = [`parse_${w}_initial`, ...new Set(sets.flat())];
    for (const name of everyName) {
      const inIndex = (await redis.sismember(`reach:cap:${name}`, id)) === 1;
      const listed = (await listAgents({ capability: name })).some((a) => a.agent_id === id);
      const should = finalNames.includes(name);
      expect({ name, inIndex, listed }).toEqual({ name, inIndex: should, listed: should });
    }
    expect(JSON.parse((await redis.hget(`reach:agent:${id}`, 'index'))!).sort()).toEqual(finalNames);

    // The feed converges on the same state: the newest record for the key is the final one.
    await feed.waitFor((r) => r.key === id && r.value?.revision === final.revision);
    const newest = feedOf(id).at(-1)!;
    expect(newest.value!.revision).toBe(final.revision);
    expect(newest.value!.capabilities.map((c) => c.name).sort()).toEqual(finalNames);
    const revisions = feedOf(id).map((r) => r.value!.revision);
    expect(revisions).toEqual([...revisions].sort((a, b) => a - b));
    await call('DELETE', `/v1/agents/${id}`, { token: admin });
  });
});

describe('GET /v1/agents', () => {
  it('lists by capability (exact, with @major), status and domain', async () => {
    const w = capWord();
    const domain = `dom${w}`;
    const a = await register(
      descriptor({ capabilities: [{ name: `query:${w}_orders` }, { name: `summarize_${w}`, version: '2.1.0' }], metadata: { domain } }),
      null,
    );
    const b = await register(descriptor({ capabilities: [{ name: `query:${w}_order_items` }, { name: `summarize_${w}@3` }] }), null);

    expect((await listAgents({ capability: `query:${w}_orders` })).map((x) => x.agent_id)).toEqual([a.agent_id]);
    expect((await listAgents({ capability: `query:${w}_order_items` })).map((x) => x.agent_id)).toEqual([b.agent_id]);
    expect((await listAgents({ capability: `summarize_${w}` })).map((x) => x.agent_id).sort()).toEqual([a.agent_id, b.agent_id].sort());
    expect((await listAgents({ capability: `summarize_${w}@2` })).map((x) => x.agent_id)).toEqual([a.agent_id]);
    expect((await listAgents({ capability: `summarize_${w}@3` })).map((x) => x.agent_id)).toEqual([b.agent_id]);
    expect((await listAgents({ domain })).map((x) => x.agent_id)).toEqual([a.agent_id]);
    expect((await listAgents({ capability: `summarize_${w}`, domain: 'default' })).map((x) => x.agent_id)).toEqual([b.agent_id]);
    expect(await listAgents({ capability: `summarize_${w}`, status: 'OFFLINE' })).toEqual([]);
    const shown = (await getAgent(a.agent_id)).body;
    expect(shown.capabilities.find((c) => c.name === `summarize_${w}`)?.version).toBe('2.1.0');
    expect(shown.metadata.domain).toBe(domain);
  });

  it('answers 404 / 2001 for an unknown agent', async () => {
    const res = await call<{ error: { code: number; name: string } }>('GET', `/v1/agents/${uniq('it.nobody')}`, { token: adminToken() });
    expect(res.status).toBe(404);
    expect(res.body.error).toMatchObject({ code: 2001, name: 'NO_ROUTE' });
  });
});

// Issue #13: listings need a token; an agent sees its own domain, and of another domain only
// the capabilities granted to its domain there; the admin sees everything.
describe('GET /v1/agents is scoped to the caller', () => {
  it('needs a token: 401 without one or with a malformed one', async () => {
    expect((await call('GET', '/v1/agents')).status).toBe(401);
    expect((await call('GET', '/v1/agents', { token: 'rt1.not.valid' })).status).toBe(401);
    expect((await call('GET', `/v1/agents/${uniq('it.x')}`)).status).toBe(401);
  });

  it('shows an agent its own domain and only the granted capabilities of another, and 404 for the rest', async () => {
    const w = capWord();
    const [home, away, hidden] = [`home${w}`, `away${w}`, `hid${w}`];
    const viewer = await register(descriptor({ capabilities: [{ name: `ask_${w}` }], metadata: { domain: home } }));
    const neighbour = await register(descriptor({ capabilities: [{ name: `chat_${w}` }], metadata: { domain: home } }));
    const partner = await register(descriptor({ capabilities: [{ name: `open_${w}` }, { name: `secret_${w}` }], metadata: { domain: away } }));
    const stranger = await register(descriptor({ capabilities: [{ name: `open_${w}` }], metadata: { domain: hidden } }));
    const grant = await call<{ grant_id: string }>('PUT', '/v1/grants', {
      token: adminToken(),
      body: { from_domain: home, to_domain: away, capability: `open_${w}` },
    });
    expect(grant.status).toBeLessThan(300);
    try {
      const seen = await call<{ agents: AgentJson[] }>('GET', '/v1/agents', { token: viewer.token });
      expect(seen.status).toBe(200);
      const byId = new Map(seen.body.agents.map((a) => [a.agent_id, a]));
      expect(byId.has(viewer.agent_id)).toBe(true);
      expect(byId.has(neighbour.agent_id)).toBe(true);
      expect(byId.get(partner.agent_id)?.capabilities.map((c) => c.name)).toEqual([`open_${w}`]);
      expect(byId.has(stranger.agent_id)).toBe(false);
      expect(seen.body.agents.every((a) => a.metadata.domain === home || a.metadata.domain === away)).toBe(true);

      expect((await call('GET', `/v1/agents/${stranger.agent_id}`, { token: viewer.token })).status).toBe(404);
      const one = await call<AgentJson>('GET', `/v1/agents/${partner.agent_id}`, { token: viewer.token });
      expect(one.body.capabilities.map((c) => c.name)).toEqual([`open_${w}`]);
      // the admin sees the partner whole, and the stranger
      expect((await getAgent(partner.agent_id)).body.capabilities.map((c) => c.name).sort()).toEqual([`open_${w}`, `secret_${w}`]);
      expect((await getAgent(stranger.agent_id)).status).toBe(200);
    } finally {
      await call('DELETE', `/v1/grants/${encodeURIComponent(grant.body.grant_id)}`, { token: adminToken() });
    }
  });
});

describe('metrics', () => {
  it('exports reach_registry_* counters and agents by status', async () => {
    const text = await (await fetch(`${urls.registry}/metrics`)).text();
    for (const name of [
      'reach_registry_registrations_total',
      'reach_registry_heartbeats_total',
      'reach_registry_offline_transitions_total',
      'reach_registry_deregistrations_total',
      'reach_registry_feed_records_total',
    ]) {
      expect(text).toContain(`# TYPE ${name} counter`);
    }
    expect(text).toMatch(/^reach_registry_agents\{status="ONLINE"\} [1-9]\d*$/m);
    expect(text).toMatch(/^reach_registry_agents\{status="OFFLINE"\} \d+$/m);
    expect(text).toMatch(/^reach_registry_registrations_total\{outcome="new"\} [1-9]\d*$/m);
  });
});
