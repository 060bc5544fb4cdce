import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { grantId } from '@reach/routing';
import { createPgPool, type Pool } from '@reach/store';
import { adminToken, stack, tokenSecret, uniq } from '../../helpers/env.js';
import { plainKafka, registryClient, TopicTap } from '../../helpers/kafka.js';
import { eventually } from '../../helpers/wait.js';
import { call, register } from './helpers.js';

// Security domains (R-A8, docs/design.md §3): cross-domain grants through the registry's admin
// API, stored in PostgreSQL (the source of truth) and published on the compacted
// reach.grants.v1 (key grant_id, tombstone = revoked) that routers follow; a registry that
// starts makes the topic equal PostgreSQL again. Every agent record carries its domain.
const admin = adminToken();
const kafka = plainKafka();
const schemas = registryClient();
let feed: TopicTap<Record<string, unknown>>;
let agents: TopicTap<Record<string, unknown>>;
let pg: Pool;
let producer: Producer;
const domains: string[] = [];

/** A fresh domain name for this run (letters, digits, "-", like DOMAIN_PATTERN wants). */
function domain(prefix: string): string {
  const d = uniq(`it-${prefix}`);
  domains.push(d);
  return d;
}

interface GrantJson {
  grant_id: string;
  from_domain: string;
  to_domain: string;
  capability: string | null;
  created_by: string | null;
  created_at: string;
}

const put = (body: unknown, token = admin, base?: string) => call<GrantJson>('PUT', '/v1/grants', { body, token, ...(base ? { base } : {}) });
const list = async (query: Record<string, string> = {}, base?: string) => {
  const res = await call<{ grants: GrantJson[] }>('GET', `/v1/grants?${new URLSearchParams(query).toString()}`, { token: admin, ...(base ? { base } : {}) });
  expect(res.status).toBe(200);
  return res.body.grants;
};

beforeAll(async () => {
  pg = createPgPool(stack.databaseUrl);
  producer = kafka.producer();
  await producer.connect();
  [feed, agents] = await Promise.all([
    new TopicTap<Record<string, unknown>>(kafka, 'reach.grants.v1', schemas).open(),
    new TopicTap<Record<string, unknown>>(kafka, 'reach.agents.v1', schemas).open(),
  ]);
});

afterAll(async () => {
  // Leave no grants behind (through the API, so the topic gets its tombstones too).
  const left = await pg.query<{ grant_id: string }>('SELECT grant_id FROM grants WHERE from_domain = ANY($1) OR to_domain = ANY($1)', [domains]);
  for (const { grant_id } of left.rows) await call('DELETE', `/v1/grants/${grant_id}`, { token: admin });
  await Promise.all([feed?.close(), agents?.close(), producer?.disconnect(), pg?.end()]);
});

describe('PUT /v1/grants', () => {
  it('creates a grant (201) in PostgreSQL and on reach.grants.v1; the same PUT again is 200 with the same grant', async () => {
    const [from, to] = [domain('sales'), domain('finance')];
    const created = await put({ from_domain: from, to_domain: to, capability: 'query:orders@2' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      grant_id: `${from}|${to}|query:orders@2`,
      from_domain: from,
      to_domain: to,
      capability: 'query:orders@2',
      created_by: 'admin',
    });
    expect(Date.parse(created.body.created_at)).not.toBeNaN();
    // The id PostgreSQL derives is the one routers compute (@reach/routing grantId).
    expect(created.body.grant_id).toBe(grantId({ from_domain: from, to_domain: to, capability: 'query:orders@2' }));

    const row = await pg.query('SELECT from_domain, to_domain, capability FROM grants WHERE grant_id = $1', [created.body.grant_id]);
    expect(row.rows).toEqual([{ from_domain: from, to_domain: to, capability: 'query:orders@2' }]);

    const rec = await feed.waitFor((r) => r.key === created.body.grant_id && r.value !== undefined);
    expect(rec.value).toMatchObject({ grant_id: created.body.grant_id, from_domain: from, to_domain: to, capability: 'query:orders@2', created_by: 'admin' });
    expect(rec.value!.created_at).toBe(Date.parse(created.body.created_at));

    const again = await put({ from_domain: from, to_domain: to, capability: 'query:orders@2' });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(created.body);
    expect((await pg.query('SELECT count(*)::int AS n FROM grants WHERE grant_id = $1', [created.body.grant_id])).rows[0]).toEqual({ n: 1 });
  });

  it('grants every capability when capability is absent or null (grant id ends in *), and one major or every major of a name', async () => {
    const [from, to] = [domain('ops'), domain('infra')];
    const all = await put({ from_domain: from, to_domain: to });
    expect(all).toMatchObject({ status: 201, body: { grant_id: `${from}|${to}|*`, capability: null } });
    expect(all.body.grant_id).toBe(grantId({ from_domain: from, to_domain: to, capability: null }));
    expect((await put({ from_domain: from, to_domain: to, capability: null })).status).toBe(200);
    expect((await put({ from_domain: from, to_domain: to, capability: 'summarize_text' })).body.grant_id).toBe(`${from}|${to}|summarize_text`);
    const rec = await feed.waitFor((r) => r.key === `${from}|${to}|*` && r.value !== undefined);
    expect(rec.value).toMatchObject({ capability: null });
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['a domain outside the grammar', { from_domain: 'sales team', to_domain: 'finance' }, 'from_domain'],
    ['a missing to_domain', { from_domain: 'sales' }, 'to_domain'],
    ['the same domain twice', { from_domain: 'sales', to_domain: 'sales' }, 'to_domain'],
    ['a capability outside the grammar', { from_domain: 'sales', to_domain: 'finance', capability: 'Query Orders' }, 'capability'],
    ['a wildcard capability', { from_domain: 'sales', to_domain: 'finance', capability: '*' }, 'capability'],
    ['an unknown field', { from_domain: 'sales', to_domain: 'finance', capabilities: ['query:orders'] }, 'capabilities'],
  ])('refuses %s with 400 / 4104 naming the field', async (_what, body, field) => {
    const res = await call<{ error: { code: number; details: { field: string } } }>('PUT', '/v1/grants', { body, token: admin });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 4104, details: { field } });
  });
});

describe('GET /v1/grants', () => {
  it('lists grants from PostgreSQL, filtered by from_domain and to_domain', async () => {
    const [a, b, c] = [domain('a'), domain('b'), domain('c')];
    await put({ from_domain: a, to_domain: b });
    await put({ from_domain: a, to_domain: c, capability: 'parse_pdf' });
    await put({ from_domain: c, to_domain: b });
    expect((await list({ from_domain: a })).map((g) => g.grant_id)).toEqual([`${a}|${b}|*`, `${a}|${c}|parse_pdf`]);
    expect((await list({ to_domain: b })).map((g) => g.grant_id).sort()).toEqual([`${a}|${b}|*`, `${c}|${b}|*`].sort());
    expect((await list({ from_domain: a, to_domain: c })).map((g) => g.grant_id)).toEqual([`${a}|${c}|parse_pdf`]);
    const everything = (await list()).map((g) => g.grant_id);
    for (const id of [`${a}|${b}|*`, `${a}|${c}|parse_pdf`, `${c}|${b}|*`]) expect(everything).toContain(id);
  });
});

describe('DELETE /v1/grants/{grant_id}', () => {
  it('revokes: gone from PostgreSQL and the listing, a tombstone on reach.grants.v1; 404 the second time', async () => {
    const [from, to] = [domain('hr'), domain('payroll')];
    const { body: grant } = await put({ from_domain: from, to_domain: to, capability: 'query:salaries@1' });
    await feed.waitFor((r) => r.key === grant.grant_id && r.value !== undefined);

    const res = await call('DELETE', `/v1/grants/${encodeURIComponent(grant.grant_id)}`, { token: admin });
    expect(res).toMatchObject({ status: 200, body: { grant_id: grant.grant_id, status: 'REVOKED' } });
    const tombstone = await feed.waitFor((r) => r.key === grant.grant_id && r.raw === null);
    expect(tombstone.value).toBeUndefined();
    expect((await pg.query('SELECT 1 FROM grants WHERE grant_id = $1', [grant.grant_id])).rowCount).toBe(0);
    expect(await list({ from_domain: from })).toEqual([]);
    expect((await call('DELETE', `/v1/grants/${grant.grant_id}`, { token: admin })).status).toBe(404);
  });
});

describe('a registry that starts reconciles reach.grants.v1 with PostgreSQL', () => {
  let child: ChildProcess | undefined;
  afterAll(async () => {
    if (!child || child.exitCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await exited;
  });

  it('re-publishes every stored grant and tombstones a grant id on the topic that PostgreSQL does not have', async () => {
    const [from, to] = [domain('kept'), domain('target')];
    const { body: kept } = await put({ from_domain: from, to_domain: to });
    await feed.waitFor((r) => r.key === kept.grant_id && r.value !== undefined);
    // A grant on the topic that PostgreSQL never had (as after a failed revocation's publish).
    const [sFrom, sTo] = [domain('stale'), domain('target')];
    const staleId = `${sFrom}|${sTo}|*`;
    const grantSchema = await schemas.getLatestSchemaId('reach.grants.v1-value');
    const stale = { grant_id: staleId, from_domain: sFrom, to_domain: sTo, capability: null, created_by: 'it', created_at: Date.now() };
    await producer.send({ topic: 'reach.grants.v1', acks: -1, messages: [{ key: staleId, value: await schemas.encode(grantSchema, stale) }] });
    await feed.waitFor((r) => r.key === staleId && r.value !== undefined);
    const seenBefore = feed.records.length;

    let out = '';
    child = spawn(process.execPath, [join('services', 'registry', 'dist', 'main.js')], {
      env: {
        ...process.env,
        REACH_INSTANCE_ID: uniq('registry-grants-it'),
        REACH_REGISTRY_PORT: '0',
        REACH_TOKEN_SECRET: tokenSecret(),
        REACH_ADMIN_TOKEN: admin,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));

    const tombstone = await feed.waitFor((r) => r.key === staleId && r.raw === null, 60_000);
    expect(tombstone.value).toBeUndefined();
    const republished = feed.records.slice(seenBefore).find((r) => r.key === kept.grant_id && r.value !== undefined);
    expect(republished?.value, `the kept grant published again; registry output:\n${out}`).toMatchObject({ grant_id: kept.grant_id, from_domain: from });
    await eventually('the reconcile to be logged', () => /grants reconciled/.test(out), 10_000);

    // The new instance serves the stored grants (from PostgreSQL).
    const base = `http://127.0.0.1:${/"port":(\d+),"msg":"http listening"/.exec(out)![1]}`;
    expect((await list({ from_domain: from }, base)).map((g) => g.grant_id)).toEqual([kept.grant_id]);
  }, 90_000);
});

describe('every agent has a domain (R-A8)', () => {
  it('is on the AgentRecord of reach.agents.v1: the declared metadata.domain, else "default"', async () => {
    const d = domain('agents');
    const inDomain = await register({ agent_id: uniq('it.domain'), agent_type: 'it.domain', capabilities: [], metadata: { domain: d } });
    const plain = await register({ agent_id: uniq('it.domain'), agent_type: 'it.domain', capabilities: [] });
    const a = await agents.waitFor((r) => r.key === inDomain.agent_id && r.value !== undefined);
    const b = await agents.waitFor((r) => r.key === plain.agent_id && r.value !== undefined);
    expect((a.value!.metadata as { domain: string }).domain).toBe(d);
    expect((b.value!.metadata as { domain: string }).domain).toBe('default');
    for (const id of [inDomain.agent_id, plain.agent_id]) await call('DELETE', `/v1/agents/${id}`, { token: admin });
  });

  it('refuses a domain outside the grammar at registration (400 / 4104)', async () => {
    const res = await call<{ error: { code: number; details: { field: string } } }>('POST', '/v1/agents', {
      body: { agent_id: uniq('it.domain'), agent_type: 'it.domain', metadata: { domain: 'no|pipes' } },
      token: admin,
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 4104, details: { field: 'metadata.domain' } });
  });
});
