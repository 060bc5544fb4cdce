import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { AgentReplacedError, type HandlerContext, type ReachMessage } from '@reach/sdk';
import { localStack, startTestAgent, stopTestAgents, testClient, uniqueName, waitUntilRoutable } from '@reach/sdk/testing';
import { adminToken } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';

// SDK scenarios of docs/sdk-scenarios.md that the other SDK test files do not cover, against the
// real stack: a connection that dies with deliveries on the way, a second connection of the
// same agent, SIGTERM while a handler runs. The Python SDK's tests (sdks/python/tests) carry
// the same scenario ids.
const client = testClient();
const cap = (verb: string) => `${verb}_${uniqueName('t').replace(/[^a-z0-9]/g, '')}`;
let child: ChildProcess | undefined;
let proxy: ChaosProxy | undefined;

afterEach(async () => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  child = undefined;
  await stopTestAgents();
  await proxy?.close();
  proxy = undefined;
});

type Status = { status: string; attempt: number; agent_id: string | null };

async function statusOf(id: string): Promise<Status | undefined> {
  const res = await fetch(`${localStack().ingressUrl}/v1/messages/${id}`, { headers: { authorization: `Bearer ${adminToken()}` } });
  return res.ok ? ((await res.json()) as Status) : undefined;
}

const reaches = (id: string, state: string) => eventually(`${id} ${state}`, async () => ((await statusOf(id))?.status === state ? statusOf(id) : undefined));

/**
 * A TCP proxy in front of the dispatcher that breaks the way networks break: it swallows what
 * the dispatcher sends, or cuts every connection (no close frame on either side).
 */
class ChaosProxy {
  dropDownstream = false;
  dropped = 0;
  accepted = 0;
  private readonly pairs = new Set<[Socket, Socket]>();

  private constructor(
    private readonly server: Server,
    private readonly target: URL,
  ) {}

  static async start(targetUrl: string): Promise<ChaosProxy> {
    const target = new URL(targetUrl);
    const server = createServer();
    const p = new ChaosProxy(server, target);
    server.on('connection', (agent) => p.serve(agent));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return p;
  }

  get url(): string {
    const { port } = this.server.address() as { port: number };
    return `ws://127.0.0.1:${port}${this.target.pathname}`;
  }

  cut(): void {
    this.dropDownstream = false;
    for (const [a, b] of this.pairs) {
      a.resetAndDestroy();
      b.resetAndDestroy();
    }
    this.pairs.clear();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise((r) => this.server.close(r));
  }

  private serve(agent: Socket): void {
    this.accepted++;
    const upstream = createConnection({ host: this.target.hostname, port: Number(this.target.port) });
    const pair: [Socket, Socket] = [agent, upstream];
    this.pairs.add(pair);
    const end = () => {
      this.pairs.delete(pair);
      agent.destroy();
      upstream.destroy();
    };
    agent.on('data', (d) => upstream.write(d));
    upstream.on('data', (d) => {
      if (this.dropDownstream) this.dropped += d.length;
      else agent.write(d);
    });
    for (const s of pair) {
      s.on('close', end);
      s.on('error', end);
    }
  }
}

describe('SDK scenarios on the real stack', () => {
  it('[reconnect-replay] the connection dies with deliveries on the way: the node reconnects with last_seq and gets them replayed, in order, without a gap', async () => {
    proxy = await ChaosProxy.start(localStack().dispatcherUrl);
    const capability = cap('count');
    const seen: Array<[number, number]> = [];
    const agent = await startTestAgent({
      stack: { ...localStack(), dispatcherUrl: proxy.url },
      handlers: {
        [capability]: async (m: ReachMessage<{ i: number }>, ctx: HandlerContext) => {
          seen.push([ctx.seq, m.payload!.i]);
          return m.payload!.i;
        },
      },
    });
    const disconnects: number[] = [];
    agent.node.on('disconnected', (d) => disconnects.push(d.code));

    for (let i = 0; i < 3; i++) await reaches((await client.submit({ capability, payload: { i } })).message_id, 'DELIVERED');
    // The network swallows what the dispatcher sends from now on, then the connection dies.
    proxy.dropDownstream = true;
    const lost: string[] = [];
    // One at a time, each dispatched before the next is sent: messages without a session_id are
    // keyed by their own id, so two sent back to back may be routed in either order.
    for (let i = 3; i < 6; i++) {
      lost.push((await client.submit({ capability, payload: { i } })).message_id);
      await reaches(lost.at(-1)!, 'DELIVERING');
    }
    await eventually('the deliveries swallowed', () => proxy!.dropped > 0);
    proxy.cut();

    for (const id of lost) expect(await reaches(id, 'DELIVERED')).toMatchObject({ attempt: 0, agent_id: agent.agentId });
    expect(seen.map(([, i]) => i)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(seen.map(([s]) => s)).toEqual(Array.from({ length: 6 }, (_, k) => seen[0]![0] + k));
    expect(disconnects).toEqual([1006]);
    expect(proxy.accepted).toBe(2);
  });

  it('[duplicate-4001] a second connection of the same agent takes over: 4001, and the node stops without reconnecting or deregistering', async () => {
    const capability = cap('hold');
    const agent = await startTestAgent({ handlers: { [capability]: async () => 'node' } });
    const disconnects: number[] = [];
    agent.node.on('disconnected', (d) => disconnects.push(d.code));
    const replaced: string[] = [];
    agent.node.on('replaced', (r) => replaced.push(r.agent_id));
    const second = new WebSocket(localStack().dispatcherUrl);
    try {
      await once(second, 'open');
      const welcome = once(second, 'message');
      second.send(JSON.stringify({ type: 'hello', agent_id: agent.agentId, token: agent.node.token, last_seq: 0 }));
      expect(JSON.parse(String((await welcome)[0]))).toMatchObject({ type: 'welcome' });
      await eventually('the node stopped', () => agent.node.status === 'stopped');
      expect(disconnects).toEqual([4001]);
      expect(replaced).toEqual([agent.agentId]);
      expect(agent.node.replaced).toBe(true);
      await expect(agent.node.run()).rejects.toMatchObject({ name: 'AgentReplacedError', codeName: 'CONNECTION_CLOSED', agentId: agent.agentId });
      await expect(agent.node.run()).rejects.toBeInstanceOf(AgentReplacedError);

      // The agent is the second connection's now (the node did not deregister it): its
      // deliveries go there, and that connection stays open.
      const sent = await client.submit({ capability, payload: { to: 'second' } });
      const frame = await new Promise<{ type: string; seq: number; message: { message_id: string } }>((resolve) =>
        second.on('message', (data) => {
          const f = JSON.parse(String(data)) as { type: string; seq: number; message: { message_id: string } };
          if (f.type === 'deliver') resolve(f);
        }),
      );
      expect(frame.message.message_id).toBe(sent.message_id);
      second.send(JSON.stringify({ type: 'ack', seq: frame.seq, message_id: sent.message_id }));
      await reaches(sent.message_id, 'DELIVERED');
      expect(second.readyState).toBe(WebSocket.OPEN);
      expect(agent.received).toEqual([]);
      expect(disconnects).toEqual([4001]);
    } finally {
      second.terminate();
      await fetch(`${localStack().registryUrl}/v1/agents/${agent.agentId}`, { method: 'DELETE', headers: { authorization: `Bearer ${adminToken()}` } });
    }
  });

  it('[duplicate-4001] two nodes with one agent id: the newer wins, the older stops with AgentReplacedError, and they do not take turns', async () => {
    const capability = cap('twin');
    const agentId = uniqueName('twin');
    const first = await startTestAgent({ descriptor: { agent_id: agentId }, handlers: { [capability]: async () => 'first' } });
    // How run() ends, caught at once: it rejects while the second node starts.
    const firstRun = first.node.run().then(
      () => undefined,
      (e: unknown) => e,
    );
    const second = await startTestAgent({ descriptor: { agent_id: agentId }, handlers: { [capability]: async () => 'second' } });
    const secondDisconnects: number[] = [];
    second.node.on('disconnected', (d) => secondDisconnects.push(d.code));
    const err = await firstRun;
    expect(err).toBeInstanceOf(AgentReplacedError);
    expect(String((err as Error).message)).toContain('taken over by a newer connection');
    // Past the older node's first reconnect (1 s + up to 20 % jitter) it would have taken the
    // agent back; it does not: the newer node serves every message and was never disconnected.
    await new Promise((r) => setTimeout(r, 2_500));
    for (let i = 0; i < 3; i++) {
      const out = await client.submit({ capability, payload: { i } }, { waitMs: 10_000 });
      expect(out.result).toMatchObject({ status: 'ok', payload: 'second' });
    }
    expect(first.node.status).toBe('stopped');
    expect(first.received).toEqual([]);
    expect(secondDisconnects).toEqual([]);
    expect(second.node.connected).toBe(true);
  });

  it('[sigterm-drain] SIGTERM while a handler runs: it finishes, its answer goes out, the agent deregisters', async () => {
    const capability = cap('slow');
    const stack = localStack();
    // An agent process as a user runs one: @reach/sdk from the workspace, endpoints from AGENT_REACH_*.
    const script = `
      import { AgentNode, connectionFromEnv } from '@reach/sdk';
      const node = new AgentNode({ ...connectionFromEnv(), descriptor: { agent_type: 'ts-drain-test', ttl_s: 10 } });
      node.handle(process.env.SLOW_CAPABILITY, async (m) => {
        process.stdout.write('started ' + m.message_id + '\\n');
        await new Promise((r) => setTimeout(r, 2000));
        return { slept: 2 };
      });
      await node.start();
      process.stdout.write('serving ' + node.agentId + '\\n');`;
    child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      env: {
        ...process.env,
        AGENT_REACH_REGISTRY_URL: stack.registryUrl,
        AGENT_REACH_DISPATCHER_URL: stack.dispatcherUrl,
        AGENT_REACH_INGRESS_URL: stack.ingressUrl,
        AGENT_REACH_TOKEN: adminToken(),
        SLOW_CAPABILITY: capability,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines: string[] = [];
    child.stdout!.on('data', (d: Buffer) => lines.push(...d.toString().split('\n').filter(Boolean)));
    const serving = await eventually('the agent serving', () => lines.find((l) => l.startsWith('serving ')));
    const agentId = serving.split(' ')[1]!;
    await waitUntilRoutable(agentId, stack);
    const sent = await client.submit({ capability, payload: { job: 1 } });
    await eventually('the handler started', () => lines.includes(`started ${sent.message_id}`));
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const [code, signal] = (await exited) as [number | null, NodeJS.Signals | null];
    expect(code === 0 || signal === 'SIGTERM').toBe(true); // the SDK re-raises the signal after stopping
    const s = await eventually('DELIVERED with the result', async () => {
      const res = await fetch(`${stack.ingressUrl}/v1/messages/${sent.message_id}`, { headers: { authorization: `Bearer ${adminToken()}` } });
      const body = (await res.json()) as Status & { result?: unknown };
      return body.status === 'DELIVERED' && body.result ? body : undefined;
    });
    expect(s).toMatchObject({ attempt: 0, agent_id: agentId, result: { status: 'ok', payload: { slept: 2 } } });
    expect((await client.agents({ capability })).filter((a) => a.status === 'ONLINE')).toEqual([]);
  });
});
