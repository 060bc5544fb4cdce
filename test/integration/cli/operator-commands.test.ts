import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reachCli } from '../../helpers/cli.js';
import { MESSAGE_ID_PATTERN } from '@reach/core';
import type { ReachMessage } from '@reach/sdk';
import { startTestAgent, stopTestAgents, uniqueName, type TestAgent } from '@reach/sdk/testing';

// `reach agents | send | status | trace` (docs/design.md §5) as a user runs them: the built CLI as a
// child process against the real running stack, with the admin token `reach up` generated.

const reach = (...args: string[]) => reachCli([...args]);

const capability = `double_${uniqueName('cli').replace(/[^a-z0-9]/g, '')}`;
let agent: TestAgent;

beforeAll(async () => {
  agent = await startTestAgent({
    descriptor: { metadata: { max_concurrency: 3 } },
    handlers: { [capability]: async (m: ReachMessage<{ n: number }>) => ({ n: m.payload!.n * 2 }) },
  });
});

afterAll(stopTestAgents);

describe('reach agents', () => {
  it('lists the agents of a capability as JSON and as a table', async () => {
    const json = await reach('agents', '--capability', capability, '--json');
    expect(json.code).toBe(0);
    const list = JSON.parse(json.stdout) as Array<{ agent_id: string; status: string }>;
    expect(list.map((a) => a.agent_id)).toEqual([agent.agentId]);
    expect(list[0]!.status).toBe('ONLINE');

    const human = await reach('agents', '--capability', capability);
    expect(human.code).toBe(0);
    const [header, row] = human.stdout.trim().split('\n');
    expect(header).toMatch(/^AGENT_ID\s+TYPE\s+STATUS\s+CAPABILITIES\s+LOAD/);
    expect(row).toContain(agent.agentId);
    expect(row).toContain(capability);
    expect(row).toMatch(/\/3/);
  });

  it('prints (none) for a capability nobody offers', async () => {
    const out = await reach('agents', '--capability', 'nobody_offers_this');
    expect(out).toMatchObject({ code: 0, stdout: '(none)\n' });
  });
});

describe('reach send', () => {
  it('--wait returns the handler result; status and trace find the message', async () => {
    const sent = await reach('send', '--capability', capability, '--payload', '{"n":21}', '--wait', '--json');
    expect(sent.stderr).toBe('');
    expect(sent.code).toBe(0);
    const body = JSON.parse(sent.stdout) as { message_id: string; status: string; result: unknown };
    expect(body.message_id).toMatch(MESSAGE_ID_PATTERN);
    expect(body.status).toBe('DELIVERED');
    expect(body.result).toEqual({ status: 'ok', payload: { n: 42 } });

    const status = await reach('status', body.message_id, '--json');
    expect(status.code).toBe(0);
    const state = JSON.parse(status.stdout) as { message_id: string; status: string; agent_id: string; trace_id: string };
    expect(state).toMatchObject({ message_id: body.message_id, status: 'DELIVERED', agent_id: agent.agentId });

    const human = await reach('status', body.message_id);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^status\s+DELIVERED$/m);
    expect(human.stdout).toMatch(/timeline/);
    for (const s of ['PENDING', 'ROUTED', 'DELIVERING', 'DELIVERED']) expect(human.stdout).toMatch(new RegExp(`\\s${s}\\s`));

    const byMessage = await reach('trace', body.message_id, '--json');
    expect(byMessage.code).toBe(0);
    const trace = JSON.parse(byMessage.stdout) as {
      trace_id: string;
      messages: Array<{ message_id: string; stages: Array<{ stage: string; duration_ms: number }> }>;
      tree: Array<{ message_id: string; link: string }>;
    };
    expect(trace.trace_id).toBe(state.trace_id);
    expect(trace.messages.map((m) => m.message_id)).toContain(body.message_id);
    // The tree and the per-stage durations (R-F1).
    expect(trace.tree).toContainEqual({ message_id: body.message_id, link: 'root', children: [] });
    const stages = trace.messages.find((m) => m.message_id === body.message_id)!.stages;
    expect(stages.map((x) => x.stage)).toEqual(expect.arrayContaining(['ingest', 'route', 'dispatch', 'agent']));
    for (const x of stages) expect(x.duration_ms).toBeGreaterThanOrEqual(0);
    const byTrace = await reach('trace', state.trace_id);
    expect(byTrace.code).toBe(0);
    expect(byTrace.stdout).toContain(`trace ${state.trace_id}`);
    expect(byTrace.stdout).toContain(body.message_id);
    expect(byTrace.stdout).toMatch(new RegExp(`\\ntree\\n${body.message_id}  task_request → ${capability}  DELIVERED`));
    expect(byTrace.stdout).toMatch(/route \d+ ms · dispatch \d+ ms · agent \d+ ms/);
  });

  it('without --wait answers PENDING in a table', async () => {
    const out = await reach('send', '--capability', capability, '--payload', '{"n":1}');
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/^MESSAGE_ID\s+STATUS/);
    expect(out.stdout).toMatch(/msg_[0-9A-Z]{26}\s+PENDING/);
  });

  it('a repeated --idempotency-key returns the original message id', async () => {
    const key = uniqueName('idem');
    const first = JSON.parse((await reach('send', '--capability', capability, '--payload', '{"n":2}', '--idempotency-key', key, '--json')).stdout) as {
      message_id: string;
    };
    const again = await reach('send', '--capability', capability, '--payload', '{"n":2}', '--idempotency-key', key);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(first.message_id);
    expect(again.stdout).toContain('same idempotency key');
  });

  it('exits 1 with the error code and name when nobody offers the capability', async () => {
    const out = await reach('send', '--capability', 'nobody_offers_this', '--payload', '{}', '--wait', '--wait-ms', '5000');
    expect(out.code).toBe(1);
    expect(out.stderr).toMatch(/2001 NO_ROUTE/);
    const json = await reach('send', '--capability', 'nobody_offers_this', '--wait', '--json');
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ error: { code: 2001, name: 'NO_ROUTE' } });
  });

  it('--topic --wait answers once the publish is fanned out, with its copies; nobody subscribed → exit 1, 2001', async () => {
    const topic = `news_${uniqueName('cli').replace(/[^a-z0-9]/g, '')}`;
    const sub = await startTestAgent({ subscriptions: { [topic]: async () => undefined } });
    const json = await reach('send', '--topic', topic, '--payload', '{"n":1}', '--wait', '--json');
    expect(json.stderr).toBe('');
    expect(json.code).toBe(0);
    const body = JSON.parse(json.stdout) as { message_id: string; status: string; copies: Array<{ agent_id: string }>; copies_total: number };
    expect(body).toMatchObject({ status: 'DELIVERED', copies_total: 1 });
    expect(body.copies.map((c) => c.agent_id)).toEqual([sub.agentId]);

    const human = await reach('send', '--topic', topic, '--payload', '{"n":2}', '--wait');
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/msg_[0-9A-Z]{26}\s+DELIVERED/);
    expect(human.stdout).toContain('fanned out to 1 copy');
    expect(human.stdout).toContain(sub.agentId);

    const nobody = await reach('send', '--topic', `${topic}_none`, '--payload', '{}', '--wait');
    expect(nobody.code).toBe(1);
    expect(nobody.stderr).toMatch(/2001 NO_ROUTE/);
  });

  it('exits 2 on usage errors', async () => {
    expect((await reach('send', '--payload', '{}')).code).toBe(2);
    expect((await reach('send', '--capability', 'a_b', '--topic', 't')).code).toBe(2);
    const bad = await reach('send', '--capability', 'a_b', '--payload', '{not json');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/not JSON/);
    expect((await reach('status')).code).toBe(2);
    expect((await reach('trace')).code).toBe(2);
  });
});

describe('reach status / trace failures', () => {
  it('exit 1 and print the code and name for an unknown message', async () => {
    const missing = 'msg_01ARZ3NDEKTSV4RRFFQ69G5FAV';
    const out = await reach('status', missing);
    expect(out.code).toBe(1);
    expect(out.stderr).toMatch(/^✘ \d+ [A-Z_]+: .*HTTP 404/);
    const json = await reach('status', missing, '--json');
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ error: { code: expect.any(Number), name: expect.any(String) } });
    expect((await reach('trace', missing)).code).toBe(1);
  });
});
