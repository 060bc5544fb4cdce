import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPgPool, type Pool } from '../../../packages/store/dist/index.js';
import { stack, uniq } from '../../helpers/env.js';
import { call, resetQuota } from './quota-helpers.js';
import { registerProducer, type ProducerAgent } from './producer-agent.js';

// The quota admin API on the running ingress (docs/design.md §3, R-D7): PUT/GET/DELETE
// /v1/quotas/{agent_id} and GET /v1/quotas, admin token only, overrides kept in PostgreSQL.
let agent: ProducerAgent;
let pg: Pool;
const touched: string[] = [];

const quotaPath = (id: string) => `/v1/quotas/${encodeURIComponent(id)}`;
const fresh = (what: string) => {
  const id = uniq(`it.quota.${what}`);
  touched.push(id);
  return id;
};

beforeAll(async () => {
  agent = await registerProducer('quota-api');
  pg = createPgPool(stack.databaseUrl, { max: 1 });
});

afterAll(async () => {
  await Promise.all(touched.map(resetQuota));
  await pg?.end();
});

describe('quota admin API auth', () => {
  it.each([
    ['GET', '/v1/quotas'],
    ['GET', quotaPath('some.agent')],
    ['PUT', quotaPath('some.agent')],
    ['DELETE', quotaPath('some.agent')],
  ])('%s %s: no token → 401, an agent token → 403, both 1003 AUTH_FAILED', async (method, path) => {
    const body = method === 'PUT' ? { rate_per_s: 5 } : undefined;
    const none = await call(method, path, { token: null, body });
    expect(none.status).toBe(401);
    expect(none.body.error).toMatchObject({ code: 1003, name: 'AUTH_FAILED' });
    const forged = await call(method, path, { token: 'rt1.not.valid', body });
    expect(forged.status).toBe(401);
    const asAgent = await call(method, path, { token: agent.token, body });
    expect(asAgent.status).toBe(403);
    expect(asAgent.body.error).toMatchObject({ code: 1003, name: 'AUTH_FAILED' });
    expect(asAgent.body.error.message).toContain(agent.agentId);
  });

  it('an agent cannot raise its own quota (nothing is stored)', async () => {
    const res = await call('PUT', quotaPath(agent.agentId), { token: agent.token, body: { rate_per_s: 1e6, burst: 1e6 } });
    expect(res.status).toBe(403);
    expect((await pg.query('SELECT 1 FROM quotas WHERE agent_id = $1', [agent.agentId])).rows).toEqual([]);
  });
});

describe('quota overrides', () => {
  it('an agent without an override has the default (100 msg/s, burst 200)', async () => {
    const id = fresh('default');
    const res = await call('GET', quotaPath(id));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      agent_id: id,
      rate_per_s: 100,
      burst: 200,
      source: 'default',
      updated_at: null,
      applied: { rate_per_s: 100, burst: 200 },
    });
  });

  it('PUT stores an override in PostgreSQL; GET shows it, applied by the instance that took it; DELETE goes back to the default', async () => {
    const id = fresh('put');
    const put = await call('PUT', quotaPath(id), { body: { rate_per_s: 1000, burst: 1500 }, headers: { 'reach-actor': 'it-test' } });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ agent_id: id, rate_per_s: 1000, burst: 1500, source: 'override', updated_by: 'admin (it-test)' });
    expect(Date.parse(put.body.updated_at as string)).toBeGreaterThan(Date.now() - 60_000);

    const row = await pg.query('SELECT rate_per_s, burst FROM quotas WHERE agent_id = $1', [id]);
    expect(row.rows).toEqual([{ rate_per_s: 1000, burst: 1500 }]);

    const got = await call('GET', quotaPath(id));
    expect(got.body).toMatchObject({ rate_per_s: 1000, burst: 1500, source: 'override', applied: { rate_per_s: 1000, burst: 1500 } });

    // A second PUT replaces it; a rate alone gets the default's proportion as burst.
    const again = await call('PUT', quotaPath(id), { body: { rate_per_s: 0.5 } });
    expect(again.body).toMatchObject({ rate_per_s: 0.5, burst: 1 });

    const del = await call('DELETE', quotaPath(id));
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ agent_id: id, rate_per_s: 100, burst: 200, source: 'default', removed: true });
    expect((await pg.query('SELECT 1 FROM quotas WHERE agent_id = $1', [id])).rows).toEqual([]);
    expect((await call('GET', quotaPath(id))).body).toMatchObject({ source: 'default', applied: { rate_per_s: 100, burst: 200 } });
    // Deleting again is harmless.
    expect((await call('DELETE', quotaPath(id))).body).toMatchObject({ removed: false });
  });

  it('GET /v1/quotas lists the overrides in agent id order with the default, paged', async () => {
    const prefix = uniq('it.quota.list');
    const ids = [`${prefix}.c`, `${prefix}.a`, `${prefix}.b`];
    touched.push(...ids);
    for (const [i, id] of ids.entries()) await call('PUT', quotaPath(id), { body: { rate_per_s: 10 + i, burst: 20 } });

    const first = await call('GET', `/v1/quotas?limit=2&after=${encodeURIComponent(`${prefix}.`)}`);
    expect(first.status).toBe(200);
    expect(first.body.default).toEqual({ rate_per_s: 100, burst: 200 });
    expect(first.body.quotas.map((q: { agent_id: string }) => q.agent_id)).toEqual([`${prefix}.a`, `${prefix}.b`]);
    expect(first.body.quotas[0]).toMatchObject({ rate_per_s: 11, burst: 20, source: 'override' });
    expect(first.body.next_after).toBe(`${prefix}.b`);
    const second = await call('GET', `/v1/quotas?limit=2&after=${encodeURIComponent(first.body.next_after as string)}`);
    expect(second.body.quotas[0]).toMatchObject({ agent_id: `${prefix}.c`, rate_per_s: 10 });
  });

  it.each([
    ['a rate as a string', { rate_per_s: '100' }, 'rate_per_s'],
    ['a zero rate', { rate_per_s: 0, burst: 5 }, 'rate_per_s'],
    ['a negative burst', { rate_per_s: 5, burst: -1 }, 'burst'],
    ['a fractional burst', { rate_per_s: 5, burst: 1.5 }, 'burst'],
    ['an unknown field', { rate: 5 }, 'rate'],
  ])('refuses %s with 400 / 4101 naming the field, and stores nothing', async (_what, body, field) => {
    const id = fresh('bad');
    const res = await call('PUT', quotaPath(id), { body });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 4101, name: 'INVALID_ENVELOPE', details: { field } });
    expect(res.body.error.message).toMatch(new RegExp(`^${field}: `));
    expect((await pg.query('SELECT 1 FROM quotas WHERE agent_id = $1', [id])).rows).toEqual([]);
  });

  it('refuses malformed JSON, a bad agent id and a bad list limit with 400', async () => {
    expect((await call('PUT', quotaPath(fresh('json')), { raw: '{"rate_per_s": ' })).status).toBe(400);
    expect((await call('PUT', quotaPath('not an id'), { body: { rate_per_s: 5 } })).body.error).toMatchObject({ code: 4101, details: { field: 'agent_id' } });
    expect((await call('GET', '/v1/quotas?limit=0')).body.error).toMatchObject({ code: 4101, details: { field: 'limit' } });
  });
});
