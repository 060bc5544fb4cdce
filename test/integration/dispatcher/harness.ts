import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import type { Producer } from 'kafkajs';
import type { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import { ulid } from 'ulid';
import WebSocket from 'ws';
import { signToken } from '@reach/core';
import { waitUntilRoutable } from '@reach/sdk/testing';
import { adminToken, tokenSecret, uniq, urls } from '../../helpers/env.js';
import { testEnvelope } from '../../helpers/envelope.js';

/**
 * Outside-client helpers for the dispatcher's integration tests: agent tokens signed with the
 * running stack's secret (what the registry would issue), a WebSocket agent written with the
 * plain `ws` package that records every frame, RoutedDelivery records produced the way the
 * router would, and extra dispatcher instances started next to the stack's own.
 */

/** An agent token like the registry issues (R-C2). */
export function agentToken(agentId: string, opts: { ttlS?: number; secret?: string } = {}): string {
  const now = Math.floor(Date.now() / 1000);
  return signToken({ sub: agentId, jti: `tok_${ulid()}`, iat: now, exp: now + (opts.ttlS ?? 3600), dom: 'default' }, opts.secret ?? tokenSecret());
}

/** A unique agent id that fits the envelope's name grammar. */
export function agentId(prefix = 'it.agent'): string {
  return uniq(prefix).replace(/-/g, '.');
}

export type Frame = Record<string, unknown> & { type: string };

/** A WebSocket agent that records frames; answers nothing by itself (tests decide). */
export class TestAgent {
  readonly frames: Frame[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  private waiters: Array<() => void> = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      this.frames.push(JSON.parse(data.toString()) as Frame);
      for (const w of this.waiters.splice(0)) w();
    });
    this.closed = new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    ws.on('error', () => undefined);
  }

  static async open(url: string = urls.ws, headers: Record<string, string> = {}): Promise<TestAgent> {
    const ws = new WebSocket(url, { headers });
    const agent = new TestAgent(ws);
    await Promise.race([once(ws, 'open'), agent.closed.then((c) => Promise.reject(new Error(`closed before open: ${c.code}`)))]);
    return agent;
  }

  /** Opens and says hello; resolves with the welcome frame. */
  static async connect(
    id: string,
    opts: { url?: string; token?: string; lastSeq?: number; headerAuth?: boolean } = {},
  ): Promise<{ agent: TestAgent; welcome: Frame }> {
    const token = opts.token ?? agentToken(id);
    const agent = await TestAgent.open(opts.url ?? urls.ws, opts.headerAuth ? { authorization: `Bearer ${token}` } : {});
    agent.send({ type: 'hello', agent_id: id, ...(opts.headerAuth ? {} : { token }), ...(opts.lastSeq !== undefined ? { last_seq: opts.lastSeq } : {}) });
    const welcome = await agent.next((f) => f.type === 'welcome' || f.type === 'error');
    if (welcome.type !== 'welcome') throw new Error(`no welcome: ${JSON.stringify(welcome)}`);
    return { agent, welcome };
  }

  send(frame: Record<string, unknown>): void {
    this.ws.send(JSON.stringify(frame));
  }

  /** The first recorded frame matching `pred` (waiting for it). */
  async next(pred: (f: Frame) => boolean, timeoutMs = 20_000): Promise<Frame> {
    const [f] = await this.waitCount(pred, 1, timeoutMs);
    return f!;
  }

  /** Waits until `count` recorded frames match; resolves with them, in arrival order. */
  async waitCount(pred: (f: Frame) => boolean, count: number, timeoutMs = 20_000): Promise<Frame[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hits = this.frames.filter(pred);
      if (hits.length >= count) return hits.slice(0, count);
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(`only ${hits.length}/${count} matching frames within ${timeoutMs} ms; got ${JSON.stringify(this.frames.map((f) => f.type))}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 250));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  deliveries(): Frame[] {
    return this.frames.filter((f) => f.type === 'deliver');
  }

  async close(): Promise<void> {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.close(1000);
    await this.closed;
  }
}

export function messageIdOf(f: Frame): string {
  return (f.message as { message_id: string }).message_id;
}

/** Produces RoutedDelivery records to reach.routed.v1 the way the router does (key = agent_id). */
export class Router {
  private schemaId = 0;

  constructor(
    private readonly producer: Producer,
    private readonly registry: SchemaRegistry,
  ) {}

  async init(): Promise<this> {
    this.schemaId = await this.registry.getLatestSchemaId('reach.routed.v1-value');
    return this;
  }

  envelope(overrides: Record<string, unknown> = {}): Record<string, unknown> {
    return testEnvelope({ capability: 'it_dispatch', producer: 'it.sender', ...overrides });
  }

  /** Routes one message to `agent`; returns its envelope. */
  async route(agent: string, envelope: Record<string, unknown> = this.envelope(), attempt = 0): Promise<Record<string, unknown>> {
    await this.routeMany(agent, [envelope], attempt);
    return envelope;
  }

  async routeMany(agent: string, envelopes: ReadonlyArray<Record<string, unknown>>, attempt = 0): Promise<void> {
    const now = Date.now();
    const messages = await Promise.all(
      envelopes.map(async (env) => ({
        key: agent,
        value: await this.registry.encode(this.schemaId, {
          message_id: env.message_id,
          parent_message_id: null,
          agent_id: agent,
          attempt,
          routed_at: now,
          deadline_at: now + 10_000,
          budget_deadline_at: null,
          rule: null,
          envelope: env,
        }),
      })),
    );
    await this.producer.send({ topic: 'reach.routed.v1', acks: -1, messages });
  }
}

/** An extra dispatcher instance next to the stack's, with its own settings. */
export interface Instance {
  readonly id: string;
  readonly port: number;
  readonly ws: string;
  readonly http: string;
  output(): string;
  stop(): Promise<void>;
}

export async function startInstance(env: Record<string, string> = {}): Promise<Instance> {
  const id = uniq('dispatcher-it');
  const child: ChildProcess = spawn(process.execPath, [join('services', 'dispatcher', 'dist', 'main.js')], {
    env: {
      ...process.env,
      REACH_TOKEN_SECRET: tokenSecret(),
      REACH_ADMIN_TOKEN: adminToken(),
      REACH_DISPATCHER_PORT: '0',
      REACH_INSTANCE_ID: id,
      REACH_LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const port = await new Promise<number>((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /"port":(\d+),"msg":"http listening"/.exec(out);
      if (m) resolve(Number(m[1]));
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`dispatcher instance exited with ${code}:\n${out}`)));
  });
  const http = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const res = await fetch(`${http}/readyz`).catch(() => undefined);
    if (res?.status === 200) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`dispatcher instance not ready:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    id,
    port,
    ws: `ws://127.0.0.1:${port}/v1/connect`,
    http,
    output: () => out,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * An agent registered at the registry for `capability` (so the router can choose it), connected
 * with the raw protocol: it records frames and answers nothing by itself. Deregister it with
 * `deregisterAgents` when done.
 */
export async function registeredAgent(capability: string, prefix = 'it.raw'): Promise<{ id: string; agent: TestAgent; token: string }> {
  const id = agentId(prefix);
  const res = await fetch(`${urls.registry}/v1/agents`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken()}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      agent_id: id,
      agent_type: 'raw',
      capabilities: [{ name: capability, mode: 'handle' }],
      metadata: { max_concurrency: 100 },
      ttl_s: 60,
    }),
  });
  if (res.status !== 201) throw new Error(`registering ${id}: ${res.status} ${await res.text()}`);
  const { token } = (await res.json()) as { token: string };
  const { agent } = await TestAgent.connect(id, { token });
  // The router sees the agent through Kafka a moment later; sending before that would be 2001.
  await waitUntilRoutable(id);
  return { id, agent, token };
}

export async function deregisterAgents(ids: readonly string[]): Promise<void> {
  await Promise.all(ids.map((id) => fetch(`${urls.registry}/v1/agents/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${adminToken()}` } })));
}
