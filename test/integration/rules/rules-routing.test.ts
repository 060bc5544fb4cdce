import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestAgent, stopTestAgents, testClient, uniqueName } from '@reach/sdk/testing';
import { adminToken, urls } from '../../helpers/env.js';
import { plainKafka, TopicTap } from '../../helpers/kafka.js';
import { reachCli } from '../../helpers/cli.js';
import { eventually } from '../../helpers/wait.js';

// ReachRules against the running router (R-B11, R-B12): the test edits the router's live
// rules file (REACH_RULES_FILE, `.reach/rules.yaml` under `reach up`), waits for the hot reload,
// and routes real messages to real SDK agents. Every rule matches only this file's unique
// message types, so other suites running at the same time are not affected.
const client = testClient();
const admin = { authorization: `Bearer ${adminToken()}` };
const name = (what: string) => uniqueName(what).replace(/-/g, '_');

interface RulesStatus {
  file: string | null;
  digest: string;
  rules: Array<{ name: string }>;
  rejected: { diagnostics: string[] } | null;
}
interface Timeline {
  events: Array<{ state: string; agent_id?: string | null; code?: number | null; reason?: string | null; detail?: Record<string, unknown> | null }>;
}

const rulesStatus = async (): Promise<RulesStatus> => (await fetch(`${urls.router}/v1/rules`, { headers: admin })).json() as Promise<RulesStatus>;
let rulesFile: string;
let original: string;

/** Writes the rules file and waits until the router runs exactly this source. */
async function useRules(source: string): Promise<void> {
  await writeFile(rulesFile, source);
  const digest = createHash('sha256').update(source).digest('hex');
  await eventually('the router to reload the rules', async () => (await rulesStatus()).digest === digest, 10_000);
}

const events = (id: string) => client.events(id) as unknown as Promise<Timeline['events']>;
const statusOf = async (id: string) => (await client.status(id)) as unknown as { status: string; code: number | null; priority?: string };
const reaches = (id: string, state: string) => eventually(`${id} ${state}`, async () => ((await statusOf(id)).status === state ? statusOf(id) : undefined));
const routedDetail = async (id: string) =>
  (await eventually(`${id} ROUTED event`, async () => (await events(id)).find((e) => e.state === 'ROUTED'))).detail as Record<string, unknown>;

beforeAll(async () => {
  const s = await rulesStatus();
  if (!s.file) throw new Error('the running router has no REACH_RULES_FILE: restart the local stack (`reach down && reach up`) so it uses .reach/rules.yaml');
  rulesFile = s.file;
  original = await readFile(rulesFile, 'utf8');
});
afterEach(stopTestAgents);
afterAll(async () => {
  if (rulesFile) await useRules(original);
});

describe('ReachRules in the router', () => {
  it('the first matching rule decides: priority lane, dispatch, and its name in the timeline', async () => {
    const type = name('rt_job');
    const cap = name('rt_cap');
    await useRules(`rules:
  - name: urgent_${type}
    when: { message_type: ${type}, target_role: ${cap}, custom_tags: [urgent] }
    action: { dispatch: random, priority: high, timeout_ms: 45000 }
  - name: plain_${type}
    when: { message_type: ${type} }
    action: { dispatch: weighted, priority: low }
`);
    const agent = await startTestAgent({ handlers: { [cap]: async () => 'ok' } });
    const urgent = await client.submit({ capability: cap, message_type: type, tags: ['urgent'], payload: { n: 1 } });
    const plain = await client.submit({ capability: cap, message_type: type, payload: { n: 2 } });
    await reaches(urgent.message_id, 'DELIVERED');
    await reaches(plain.message_id, 'DELIVERED');
    expect(await routedDetail(urgent.message_id)).toMatchObject({ rule: `urgent_${type}`, strategy: 'random', chosen: agent.agentId });
    expect(await routedDetail(plain.message_id)).toMatchObject({ rule: `plain_${type}`, strategy: 'weighted' });
    const got = new Map(agent.received.map((m) => [m.message_id, m]));
    expect(got.get(urgent.message_id)).toMatchObject({ priority: 'HIGH', timeout_ms: 45000 });
    expect(got.get(plain.message_id)).toMatchObject({ priority: 'LOW', timeout_ms: null });
  });

  it('an invalid file keeps the last good rules in force and says why, with line and column', async () => {
    const type = name('rt_keep');
    const cap = name('rt_keep_cap');
    const good = `rules:\n  - name: keep_${type}\n    when: { message_type: ${type} }\n    action: { dispatch: random }\n`;
    await useRules(good);
    const before = await rulesStatus();
    await writeFile(rulesFile, `rules:\n  - name: broken_${type}\n    when: { message_type: ${type} }\n    action: { dispatch: rnadom }\n`);
    const rejected = await eventually('the rejection', async () => (await rulesStatus()).rejected ?? undefined, 10_000);
    expect(rejected.diagnostics.join('\n')).toMatch(/:4:\d+: error: .*dispatch/);
    const after = await rulesStatus();
    expect(after.digest).toBe(before.digest);
    expect(after.rules.map((r) => r.name)).toEqual([`keep_${type}`]);
    // Routing goes on under the kept rule.
    await startTestAgent({ handlers: { [cap]: async () => 'ok' } });
    const m = await client.submit({ capability: cap, message_type: type, payload: {} });
    await reaches(m.message_id, 'DELIVERED');
    expect(await routedDetail(m.message_id)).toMatchObject({ rule: `keep_${type}`, strategy: 'random' });
  });

  it('dispatch broadcast gives every handler of the capability its own tracked copy', async () => {
    const type = name('rt_bcast');
    const cap = name('rt_bcast_cap');
    await useRules(`rules:\n  - name: all_${type}\n    when: { message_type: ${type} }\n    action: { dispatch: broadcast }\n`);
    const agents = await Promise.all([0, 1, 2].map(() => startTestAgent({ handlers: { [cap]: async () => 'ok' } })));
    const m = await client.submit({ capability: cap, message_type: type, payload: { hello: 'all' } });
    await eventually('every agent got a copy', () => agents.every((a) => a.received.length === 1));
    const copies = agents.map((a) => a.received[0]!);
    expect(new Set(copies.map((c) => c.message_id)).size).toBe(3);
    expect(copies.every((c) => c.headers['reach-fanout-parent'] === m.message_id)).toBe(true);
    expect(await routedDetail(m.message_id)).toMatchObject({ rule: `all_${type}`, strategy: 'broadcast', copies_total: 3 });
    // The broadcast message itself ends once fanned out; each copy ends on its own id.
    await reaches(m.message_id, 'DELIVERED');
    for (const c of copies) await reaches(c.message_id, 'DELIVERED');
  });

  it('dispatch sticky keeps every message with the same sticky_by value on one agent', async () => {
    const type = name('rt_sticky');
    const cap = name('rt_sticky_cap');
    await useRules(`rules:\n  - name: conv_${type}\n    when: { message_type: ${type} }\n    action: { dispatch: sticky, sticky_by: correlation_id }\n`);
    const agents = await Promise.all([0, 1, 2].map(() => startTestAgent({ handlers: { [cap]: async () => 'ok' } })));
    const ids: string[] = [];
    for (let i = 0; i < 8; i++)
      ids.push((await client.submit({ capability: cap, message_type: type, correlation_id: `conv-${type}`, payload: { i } })).message_id);
    await Promise.all(ids.map((id) => reaches(id, 'DELIVERED')));
    const owners = agents.filter((a) => a.received.length > 0);
    expect(owners).toHaveLength(1);
    expect(owners[0]!.received).toHaveLength(8);
    expect(await routedDetail(ids[7]!)).toMatchObject({ rule: `conv_${type}`, strategy: 'sticky', sticky: { sticky_by: 'correlation_id', kept: true } });
  });

  it('fallback reject refuses at once even when the message could wait (2001, no parking)', async () => {
    const type = name('rt_reject');
    await useRules(
      `rules:\n  - name: strict_${type}\n    when: { message_type: ${type} }\n    action: { dispatch: weighted }\n    fallback: { if_no_available_agent: reject }\n`,
    );
    const m = await client.submit({ capability: name('nobody'), message_type: type, expire_at: Date.now() + 60_000, payload: {} });
    const s = await reaches(m.message_id, 'REJECTED');
    expect(s.code).toBe(2001);
  });

  it('fallback queue_task parks the message and it flows by itself once a capable agent appears', async () => {
    const type = name('rt_queue');
    const cap = name('rt_queue_cap');
    await useRules(
      `rules:\n  - name: wait_${type}\n    when: { message_type: ${type} }\n    action: { dispatch: weighted }\n    fallback: { if_no_available_agent: queue_task }\n`,
    );
    // No expire_at: without the rule this would be rejected with 2001 at once.
    const m = await client.submit({ capability: cap, message_type: type, payload: { parked: true } });
    const parked = await eventually('parked', async () => (await events(m.message_id)).find((e) => e.reason === 'parked'));
    expect(parked).toMatchObject({ state: 'PENDING', code: 2001 });
    expect(parked.detail).toMatchObject({ rule: `wait_${type}`, parked_until: expect.any(String) });
    expect((await statusOf(m.message_id)).status).toBe('PENDING');
    const agent = await startTestAgent({ handlers: { [cap]: async () => 'done' } });
    await reaches(m.message_id, 'DELIVERED');
    expect(agent.received.map((r) => r.payload)).toEqual([{ parked: true }]);
  });

  it('fallback notify_admin raises an alert on reach.alerts.v1 naming the rule and the message', async () => {
    const type = name('rt_notify');
    const cap = name('rt_notify_cap');
    const alerts = await new TopicTap<{ kind: string; severity: string; message_id: string | null; rule: string | null; summary: string }>(
      plainKafka(),
      'reach.alerts.v1',
    ).open();
    try {
      await useRules(
        `rules:\n  - name: page_${type}\n    when: { message_type: ${type} }\n    action: { dispatch: random }\n    fallback: { if_no_available_agent: notify_admin }\n`,
      );
      const m = await client.submit({ capability: cap, message_type: type, payload: {} });
      const alert = await alerts.waitFor((r) => r.value?.message_id === m.message_id);
      expect(alert.value).toMatchObject({ kind: 'NO_AVAILABLE_AGENT', rule: `page_${type}`, severity: 'P2' });
      expect(alert.value!.summary).toContain(cap);
      // Without expire_at the message itself is refused as without a rule: REJECTED 2001.
      expect((await reaches(m.message_id, 'REJECTED')).code).toBe(2001);
    } finally {
      await alerts.close();
    }
  });

  it('explain shows the rule, the candidates with their scores and the choice, and changes nothing', async () => {
    const type = name('rt_explain');
    const cap = name('rt_explain_cap');
    await useRules(
      `rules:\n  - name: explain_${type}\n    when: { message_type: ${type}, target_role: ${cap} }\n    action: { dispatch: sticky, sticky_by: session_id, priority: high }\n`,
    );
    const agents = await Promise.all([0, 1].map(() => startTestAgent({ handlers: { [cap]: async () => 'ok' } })));
    const res = await fetch(`${urls.router}/v1/rules/explain`, {
      method: 'POST',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify({ capability: cap, message_type: type, session_id: 's-1', payload: {} }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      rule: { name: string; at: { line: number } };
      routed_as: { priority: string };
      decision: { kind: string; agentId: string; trace: { candidates: Array<{ agent_id: string; score: number }>; sticky: { bound: string | null } } };
    };
    expect(body.rule).toMatchObject({ name: `explain_${type}`, at: { line: 2 } });
    expect(body.routed_as.priority).toBe('HIGH');
    expect(body.decision.kind).toBe('routed');
    expect(body.decision.trace.candidates.map((c) => c.agent_id).sort()).toEqual(agents.map((a) => a.agentId).sort());
    expect(body.decision.trace.candidates.every((c) => typeof c.score === 'number')).toBe(true);
    // A dry run binds nothing: the same question again finds no session binding either.
    const again = (await (
      await fetch(`${urls.router}/v1/rules/explain`, {
        method: 'POST',
        headers: { ...admin, 'content-type': 'application/json' },
        body: JSON.stringify({ capability: cap, message_type: type, session_id: 's-1', payload: {} }),
      })
    ).json()) as typeof body;
    expect(again.decision.trace.sticky.bound).toBeNull();

    // The same question from the CLI: `reach rules explain <message.json>`.
    const dir = await mkdtemp(join(tmpdir(), 'reach-explain-'));
    try {
      const file = join(dir, 'message.json');
      await writeFile(file, JSON.stringify({ capability: cap, message_type: type, payload: {} }));
      const human = await reachCli(['rules', 'explain', file]);
      expect(human.code).toBe(0);
      expect(human.stdout).toContain(`rule       explain_${type} (`);
      expect(human.stdout).toMatch(/decision\s+routed \(\w+\) → /);
      for (const a of agents) expect(human.stdout).toContain(a.agentId);
      const json = await reachCli(['rules', 'explain', file, '--json']);
      expect((JSON.parse(json.stdout) as typeof body).rule.name).toBe(`explain_${type}`);
      const missing = await reachCli(['rules', 'explain', join(dir, 'nope.json')]);
      expect(missing.code).toBe(2);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('the rules endpoints need the admin token', async () => {
    expect((await fetch(`${urls.router}/v1/rules`)).status).toBe(401);
  });
});
