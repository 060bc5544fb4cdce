import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SendMessageRequest, TaskState, type Task } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { testClient } from '@reach/sdk/testing';
import { reachCli } from '../../helpers/cli.js';
import { scrape } from '../../helpers/metrics.js';
import { adminToken, uniq, urls } from '../../helpers/env.js';
import { registerProducer } from '../ingress/producer-agent.js';
import { dataPart, startSdkAgent, textPart, type SdkAgent } from './sdk-agent.js';

// Issue #29 §2 and §3: an A2A agent written with the official A2A JS SDK is an Agent-Reach
// target. Imported by its card URL (`reach agents import-a2a`), it gets messages through the
// real pipeline — the dispatcher sends them with SendMessage, polls a task that is still working,
// and the answer comes back as the message's result — and the registry probes it instead of
// heartbeats. Last, an A2A client calls an A2A agent *through* Agent-Reach while the agent's
// process is killed (SIGKILL) and started again, and the task completes with the retry in its
// timeline.
const agents: SdkAgent[] = [];
const imported: string[] = [];

afterEach(async () => {
  for (const a of agents.splice(0)) await a.stop();
  for (const id of imported.splice(0))
    await fetch(`${urls.registry}/v1/agents/${encodeURIComponent(id)}`, { method: 'DELETE', headers: { authorization: `Bearer ${adminToken()}` } });
});

/** The echo agent of echo-agent-main.ts in its own process (Node runs the TypeScript by stripping its types). */
async function startEchoProcess(skill: string, port: number): Promise<{ port: number; kill(): Promise<void> }> {
  const child = spawn(process.execPath, [join('test', 'integration', 'a2a', 'echo-agent-main.ts')], {
    env: { ...process.env, PORT: String(port), SKILL: skill },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const bound = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /listening (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`the echo agent exited with ${code} before listening: ${out}`)));
  });
  return {
    port: bound,
    kill: async () => {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Pushes the dispatcher could not complete (connection refused, timeout, 5xx), A2A ones included. */
async function pushFailures(): Promise<number> {
  const { samples } = await scrape(urls.dispatcher);
  return samples.find((x) => x.name === 'reach_dispatcher_http_pushes_total' && x.labels.outcome === 'failure')?.value ?? 0;
}

/** A skill id as A2A agents write them (with '-'), unique to the test. */
const skillId = (what: string) => uniq(`a2a-${what}`);
const capabilityOf = (skill: string) => skill.replace(/-/g, '_');

async function importAgent(agent: SdkAgent, extra: string[] = []): Promise<{ agent_id: string }> {
  const r = await reachCli(['agents', 'import-a2a', agent.cardUrl, '--agent-id', uniq('a2a.sdk'), ...extra, '--json']);
  expect(r.code, r.stderr).toBe(0);
  const body = JSON.parse(r.stdout) as { agent_id: string };
  imported.push(body.agent_id);
  return body;
}

async function agentRecord(
  id: string,
): Promise<{ status: string; capabilities: Array<{ name: string }>; endpoints: { http: string; protocol_version: string } }> {
  const res = await fetch(`${urls.registry}/v1/agents/${encodeURIComponent(id)}`, { headers: { authorization: `Bearer ${adminToken()}` } });
  return (await res.json()) as never;
}

async function eventually<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await check();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

interface Event {
  state: string;
  attempt: number;
  code: number | null;
  detail: Record<string, unknown> | null;
}

async function timeline(id: string): Promise<Event[]> {
  const res = await fetch(`${urls.ingress}/v1/messages/${id}/events`, { headers: { authorization: `Bearer ${adminToken()}` } });
  return ((await res.json()) as { events: Event[] }).events;
}

describe('A2A outbound: an @a2a-js/sdk agent as an Agent-Reach target', () => {
  it('is imported by its card URL: skills become capabilities, endpoints.a2a its JSON-RPC URL', async () => {
    const skill = skillId('import');
    const agent = await startSdkAgent(skill, () => ({ kind: 'complete', parts: [textPart('hi')] }));
    agents.push(agent);
    const { agent_id } = await importAgent(agent, ['--max-concurrency', '4']);
    const record = await agentRecord(agent_id);
    expect(record.status).toBe('ONLINE');
    expect(record.capabilities.map((c) => c.name)).toEqual([capabilityOf(skill)]);
    expect(record.endpoints).toMatchObject({ http: `${agent.url}/a2a/jsonrpc`, protocol_version: 'a2a/1.0' });
  });

  it('delivers with SendMessage: the A2A answer is the result; a task still working is polled to the end; FAILED is a reject', async () => {
    const skill = skillId('deliver');
    let finish: () => void = () => undefined;
    const later = new Promise<void>((r) => (finish = r));
    const agent = await startSdkAgent(skill, (m) => {
      const text = m.parts[0]?.content?.$case === 'text' ? m.parts[0].content.value : undefined;
      if (text === 'fail please') return { kind: 'fail', text: 'cannot do that' };
      if (text === 'take your time') return { kind: 'slow', until: later, parts: [textPart('took my time')] };
      return { kind: 'complete', parts: [dataPart({ got: m.parts[0]?.content?.value ?? null })] };
    });
    agents.push(agent);
    await importAgent(agent);
    const client = testClient();
    const capability = capabilityOf(skill);

    const quick = await client.submit({ capability, payload: { q: 1 } }, { waitMs: 20_000 });
    expect(quick.result).toEqual({ status: 'ok', payload: { got: { q: 1 } } });
    expect(agent.received.at(-1)?.messageId).toBe(quick.message_id);

    const slow = client.submit({ capability, payload: 'take your time' }, { waitMs: 25_000 });
    await eventually('the slow task started', async () => (agent.received.some((m) => m.parts[0]?.content?.value === 'take your time') ? true : undefined));
    // The dispatcher polls the task while the agent works on it.
    const polls = agent.methods.filter((m) => m === 'GetTask').length;
    await eventually('GetTask polls of the working task', async () => (agent.methods.filter((m) => m === 'GetTask').length > polls ? true : undefined));
    finish();
    expect((await slow).result).toEqual({ status: 'ok', payload: 'took my time' });

    const failed = await client
      .submit({ capability, payload: 'fail please' }, { waitMs: 20_000 })
      .catch((e: unknown) => e as { code?: number; message?: string });
    expect(failed).toMatchObject({ code: 3003 });
    expect(String((failed as { message?: string }).message)).toMatch(/FAILED: cannot do that/);
  });

  it('the registry probes an A2A agent: stopped, it goes OFFLINE; back, it is ONLINE again', async () => {
    const skill = skillId('probe');
    const agent = await startSdkAgent(skill, () => ({ kind: 'complete', parts: [textPart('ok')] }));
    agents.push(agent);
    const { agent_id } = await importAgent(agent, ['--ttl', '30']);
    await agent.stop();
    await eventually('OFFLINE', async () => ((await agentRecord(agent_id)).status === 'OFFLINE' ? true : undefined), 50_000);
    // a dead A2A agent is not routed to: its only capability has no route now
    const refused = await testClient()
      .submit({ capability: capabilityOf(skill), payload: 'anyone?' }, { waitMs: 10_000 })
      .catch((e: unknown) => e as { code?: number });
    expect(refused).toMatchObject({ code: 2001 });
    await agent.restart();
    await eventually('ONLINE again', async () => ((await agentRecord(agent_id)).status === 'ONLINE' ? true : undefined), 30_000);
  }, 90_000);

  it('an A2A client calls an A2A agent through Agent-Reach while the agent process is killed (SIGKILL) and restarted: the task completes, the retry in its timeline', async () => {
    const skill = skillId('restart');
    let agent = await startEchoProcess(skill, 0);
    const port = agent.port;
    const r = await reachCli(['agents', 'import-a2a', `http://127.0.0.1:${port}/.well-known/agent-card.json`, '--agent-id', uniq('a2a.echo'), '--json']);
    expect(r.code, r.stderr).toBe(0);
    imported.push((JSON.parse(r.stdout) as { agent_id: string }).agent_id);
    const sender = await registerProducer('a2a-through');
    const fetchImpl: typeof fetch = (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set('authorization', `Bearer ${sender.token}`);
      return fetch(input, { ...init, headers });
    };
    const a2a = await new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl })] }),
    ).createFromUrl(urls.ingress);

    await agent.kill(); // the agent dies …
    const request = SendMessageRequest.fromJSON({
      message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'are you there' }] },
      metadata: { skill: capabilityOf(skill) },
      configuration: { returnImmediately: true },
    });
    const failuresBefore = await pushFailures();
    const submitted = (await a2a.sendMessage(request)) as Task;
    // The dispatcher's SendMessage found nobody; the agent is started again, and the delivery is
    // retried once its ack deadline has passed.
    await eventually('a failed delivery to the dead agent', async () => ((await pushFailures()) > failuresBefore ? true : undefined), 20_000);
    agent = await startEchoProcess(skill, port); // … and is started again
    try {
      const done = await eventually(
        'the task completed',
        async () => {
          const t = await a2a.getTask({ tenant: '', id: submitted.id, historyLength: undefined });
          return t.status?.state === TaskState.TASK_STATE_COMPLETED ? t : undefined;
        },
        40_000,
      );
      expect(done.artifacts[0]?.parts[0]?.content).toEqual({ $case: 'data', value: { echo: 'are you there' } });
      const events = await timeline(submitted.id);
      expect(Math.max(...events.map((e) => e.attempt))).toBeGreaterThan(0);
      expect(events.at(-1)).toMatchObject({ state: 'DELIVERED' });
      // the A2A ids beside the message id: the client's messageId on PENDING, the agent's task id on DELIVERED
      expect(events[0]).toMatchObject({ state: 'PENDING', detail: { via: 'a2a', a2a_message_id: request.message!.messageId } });
      expect(String(events.at(-1)!.detail?.a2a_task_id)).toMatch(/^[0-9a-f-]{36}$/);
    } finally {
      await agent.kill();
    }
  }, 120_000);
});
