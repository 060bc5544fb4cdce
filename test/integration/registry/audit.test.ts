import { afterAll, describe, expect, it } from 'vitest';
import { adminToken, uniq, urls } from '../../helpers/env.js';
import { reachCli } from '../../helpers/cli.js';
import { capWord, register } from './helpers.js';

// Issue #13, the audit trail: every admin action — on ingress (quotas), the registry (grants,
// revocations, agent deletion), the dead-letter service (replay, purge) and the router (rules
// reload) — is a row of audit_log with who, when, what and the result, refused attempts
// included; GET /v1/audit on the registry (admin only) and `reach audit` read it.

interface Answer {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

async function call(base: string, method: string, path: string, token: string | null, body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${base}${path}`, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

interface Entry {
  audit_id: string;
  at: string;
  actor: string;
  source: string | null;
  service: string;
  action: string;
  target: string | null;
  request: { method: string; path: string; body: unknown } | null;
  status: number;
  result: string;
}

const since = new Date(Date.now() - 1000).toISOString();
const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const c of cleanups) await c();
});

async function trail(filter: Record<string, string> = {}): Promise<Entry[]> {
  const q = new URLSearchParams({ since, limit: '1000', ...filter });
  const r = await call(urls.registry, 'GET', `/v1/audit?${q}`, adminToken());
  expect(r.status).toBe(200);
  return r.body.entries as Entry[];
}

describe('the audit trail of admin actions', () => {
  it('records every admin action with who, when, what and the result, and answers GET /v1/audit', async () => {
    const w = capWord();
    const victim = await register({ agent_id: uniq('it.audited'), agent_type: 'audited', capabilities: [] });
    const other = await register({ agent_id: uniq('it.audited'), agent_type: 'audited', capabilities: [] });
    const admin = adminToken();
    const missingDlq = `dlq_${w}`;
    const actions: Array<[string, string | null, Promise<Answer>]> = [];
    const act = (action: string, target: string | null, p: Promise<Answer>) => actions.push([action, target, p]);

    act('quota.set', victim.agent_id, call(urls.ingress, 'PUT', `/v1/quotas/${victim.agent_id}`, admin, { rate_per_s: 5, burst: 10 }));
    await actions[actions.length - 1]![2];
    act('quota.reset', victim.agent_id, call(urls.ingress, 'DELETE', `/v1/quotas/${victim.agent_id}`, admin));
    const grant = await call(urls.registry, 'PUT', '/v1/grants', admin, { from_domain: `a${w}`, to_domain: `b${w}` });
    expect(grant.status).toBe(201);
    act('grant.revoke', grant.body.grant_id, call(urls.registry, 'DELETE', `/v1/grants/${encodeURIComponent(grant.body.grant_id)}`, admin));
    act('token.revoke_agent', other.agent_id, call(urls.registry, 'POST', `/v1/agents/${other.agent_id}/tokens/revoke`, admin));
    act('dlq.purge', missingDlq, call(urls.deadLetter, 'DELETE', `/v1/dlq/${missingDlq}`, admin));
    act('dlq.replay', missingDlq, call(urls.deadLetter, 'POST', `/v1/dlq/${missingDlq}/replay`, admin));
    act('dlq.replay_filter', null, call(urls.deadLetter, 'POST', '/v1/dlq/replay', admin, { ids: [missingDlq], dry_run: true }));
    act('rules.reload', null, call(urls.router, 'POST', '/v1/rules/reload', admin));
    act('agent.delete', victim.agent_id, call(urls.registry, 'DELETE', `/v1/agents/${victim.agent_id}`, admin));
    // refused: an agent's own (valid) token on an admin endpoint
    const intruder = await register({ agent_id: uniq('it.intruder'), agent_type: 'audited', capabilities: [] });
    const denied = await call(urls.registry, 'PUT', '/v1/grants', intruder.token, { from_domain: `c${w}`, to_domain: `d${w}` });
    expect(denied.status).toBe(403);
    const answers = await Promise.all(actions.map(([, , p]) => p));

    const entries = await trail();
    const find = (action: string, target: string | null) => entries.find((e) => e.action === action && (target === null || e.target === target));
    const putGrant = entries.find(
      (e) => e.action === 'grant.put' && e.actor === 'admin' && (e.request?.body as { from_domain?: string })?.from_domain === `a${w}`,
    );
    expect(putGrant).toMatchObject({ service: 'registry', result: 'ok', status: 201, source: expect.stringMatching(/127\.0\.0\.1/) });
    for (const [i, [action, target]] of actions.entries()) {
      const e = find(action, target);
      expect({ action, found: e !== undefined }).toEqual({ action, found: true });
      expect(e).toMatchObject({ actor: 'admin', status: answers[i]!.status, result: answers[i]!.status < 400 ? 'ok' : 'failed' });
      expect(Date.parse(e!.at)).toBeGreaterThanOrEqual(Date.parse(since));
    }
    expect(find('quota.set', victim.agent_id)?.request).toMatchObject({
      method: 'PUT',
      path: `/v1/quotas/${victim.agent_id}`,
      body: { rate_per_s: 5, burst: 10 },
    });
    expect(find('dlq.purge', missingDlq)).toMatchObject({ service: 'dead-letter', status: 404, result: 'failed' });
    const refused = entries.find((e) => e.action === 'grant.put' && e.actor === `agent:${intruder.agent_id}`);
    expect(refused).toMatchObject({ result: 'denied', status: 403 });
    // never a credential in the trail
    expect(JSON.stringify(entries)).not.toContain(admin);
    expect(JSON.stringify(entries)).not.toContain(intruder.token);

    // filters
    const onlyPurges = await trail({ action: 'dlq.purge' });
    expect(onlyPurges.length).toBeGreaterThan(0);
    expect(onlyPurges.every((e) => e.action === 'dlq.purge')).toBe(true);
    expect((await trail({ result: 'denied' })).every((e) => e.result === 'denied')).toBe(true);
    expect((await call(urls.registry, 'GET', '/v1/audit?limit=0', admin)).status).toBe(400);
    expect((await call(urls.registry, 'GET', '/v1/audit?colour=red', admin)).status).toBe(400);
  });

  it('is for the admin only', async () => {
    const agent = await register({ agent_id: uniq('it.auditor'), agent_type: 'audited', capabilities: [] });
    expect((await call(urls.registry, 'GET', '/v1/audit', null)).status).toBe(401);
    expect((await call(urls.registry, 'GET', '/v1/audit', agent.token)).status).toBe(403);
  });

  it('`reach audit` prints the trail as a table, and as JSON with --json', async () => {
    const w = capWord();
    const grant = await call(urls.registry, 'PUT', '/v1/grants', adminToken(), { from_domain: `e${w}`, to_domain: `f${w}` });
    cleanups.push(() => call(urls.registry, 'DELETE', `/v1/grants/${encodeURIComponent(grant.body.grant_id)}`, adminToken()));
    const json = await reachCli(['audit', '--action', 'grant.put', '--since', since, '--json']);
    expect(json.code).toBe(0);
    const page = JSON.parse(json.stdout) as { entries: Entry[] };
    expect(page.entries.some((e) => (e.request?.body as { from_domain?: string })?.from_domain === `e${w}`)).toBe(true);
    const human = await reachCli(['audit', '--action', 'grant.put', '--limit', '5']);
    expect(human.code).toBe(0);
    expect(human.stdout.split('\n')[0]).toMatch(/^AT\s+ACTOR\s+SOURCE\s+ACTION\s+TARGET\s+RESULT/);
    expect(human.stdout).toContain('grant.put');
    const bad = await reachCli(['audit', '--result', 'maybe']);
    expect(bad.code).not.toBe(0);
  });
});
