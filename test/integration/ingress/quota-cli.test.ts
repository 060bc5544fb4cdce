import { afterAll, describe, expect, it } from 'vitest';
import { reachCli } from '../../helpers/cli.js';
import { uniq } from '../../helpers/env.js';
import { call, resetQuota } from './quota-helpers.js';

// `reach quota set|get|list|reset` (docs/design.md §5) as an operator runs it: the built CLI as a child
// process against the running ingress, with the admin token `reach up` generated.
const touched: string[] = [];

const reach = (args: string[], env: NodeJS.ProcessEnv = process.env) => reachCli(['quota', ...args], env);

const agentId = (what: string) => {
  const id = uniq(`it.quota.cli.${what}`);
  touched.push(id);
  return id;
};

afterAll(async () => {
  await Promise.all(touched.map(resetQuota));
});

describe('reach quota', () => {
  it('set stores an override the service applies; get shows it as JSON and as a table', async () => {
    const id = agentId('set');
    const set = await reach(['set', id, '250', '--burst', '400']);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toContain(`quota of ${id}: 250 msg/s, burst 400`);
    expect((await call('GET', `/v1/quotas/${id}`)).body).toMatchObject({ rate_per_s: 250, burst: 400, source: 'override', applied: { rate_per_s: 250 } });

    const json = await reach(['get', id, '--json']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      agent_id: id,
      rate_per_s: 250,
      burst: 400,
      source: 'override',
      updated_by: expect.stringMatching(/^admin \(cli/),
    });

    const human = await reach(['get', id]);
    const [header, row] = human.stdout.trim().split('\n');
    expect(header).toMatch(/^AGENT_ID\s+RATE_PER_S\s+BURST\s+SOURCE\s+UPDATED_AT/);
    expect(row).toMatch(new RegExp(`^${id.replace(/\./g, '\\.')}\\s+250\\s+400\\s+override`));

    const setJson = await reach(['set', id, '12.5', '--json']);
    expect(JSON.parse(setJson.stdout)).toMatchObject({ rate_per_s: 12.5, burst: 25 });
  });

  it('list shows the default and the overrides; reset goes back to the default', async () => {
    const id = agentId('list');
    expect((await reach(['set', id, '7'])).code).toBe(0);
    const list = await reach(['list', '--json', '--after', id.slice(0, -1), '--limit', '1000']);
    expect(list.code).toBe(0);
    const page = JSON.parse(list.stdout) as { default: unknown; quotas: Array<{ agent_id: string }> };
    expect(page.default).toEqual({ rate_per_s: 100, burst: 200 });
    expect(page.quotas.map((q) => q.agent_id)).toContain(id);
    const human = await reach(['list', '--after', id.slice(0, -1)]);
    expect(human.stdout).toMatch(/^default: 100 msg\/s, burst 200\n/);

    const reset = await reach(['reset', id]);
    expect(reset).toMatchObject({ code: 0 });
    expect(reset.stdout).toContain('reset to the default: 100 msg/s, burst 200');
    expect(JSON.parse((await reach(['get', id, '--json'])).stdout)).toMatchObject({ source: 'default', rate_per_s: 100 });
  });

  it('fails with a non-zero exit and the code: a bad number (4101), a wrong admin token (1003), bad usage (2)', async () => {
    const id = agentId('bad');
    const bad = await reach(['set', id, '0', '--json']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/✘ 4101 INVALID_ENVELOPE: rate_per_s: .*\(HTTP 400\)/);
    expect(JSON.parse(bad.stdout)).toMatchObject({ error: { code: 4101 } });

    const wrong = await reach(['get', id], { ...process.env, REACH_ADMIN_TOKEN: 'wrong-token-0123456789' });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/✘ 1003 AUTH_FAILED: .*\(HTTP 401\)/);

    expect((await reach(['set', id])).code).toBe(2);
    expect((await reach(['set', id, 'lots'])).code).toBe(2);
    expect((await reach(['frobnicate'])).code).toBe(2);
  });
});
