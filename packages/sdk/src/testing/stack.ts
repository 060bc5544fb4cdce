import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ERROR, type Logger } from '@reach/core';
import { AgentNode } from '../agent-node.js';
import type { AgentNodeOptions, Handler } from '../node-types.js';
import { ReachClient } from '../reach-client.js';
import { fetchFor, stackClientTls, type ClientTls } from '../tls.js';
import type { AgentDescriptor, ReachMessage } from '../types.js';

/**
 * Testing kit for agent authors (STYLE practice 8): run an agent against a local Agent-Reach
 * stack (`reach up`) in a test, with unique names so tests never see each other's agents, and
 * cleanup that deregisters everything a test started.
 *
 *   const agent = await startTestAgent({ handlers: { [cap]: async (m) => m.payload } });
 *   const out = await testClient().submit({ capability: cap, payload: 1 }, { waitMs: 10_000 });
 *   afterEach(stopTestAgents);
 */
export interface TestStack {
  registryUrl: string;
  dispatcherUrl: string;
  ingressUrl: string;
  /** A router's admin view (GET /v1/view/agents/{id}), to wait until routing can see an agent. */
  routerUrl: string;
  /** The stack's admin token (also accepted for registration). */
  adminToken: string | undefined;
  /**
   * The schema registry the stack's services use: REACH_SCHEMA_REGISTRY_URL, else the
   * development registry `reach up` runs on REACH_DEV_SCHEMA_REGISTRY_PORT. Tools that write
   * framed records to Kafka must use this one: with another registry's ids the stack refuses them.
   */
  schemaRegistryUrl: string;
  /** For a stack serving TLS: REACH_CA_FILE (and REACH_TLS_CLIENT_CERT/KEY for mutual TLS). */
  tls?: ClientTls;
}

/** `<prefix>-<time>-<random>`: a name (capability, topic, agent type) no other test uses. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
}

function findAdminToken(env: NodeJS.ProcessEnv): string | undefined {
  if (env.REACH_ADMIN_TOKEN) return env.REACH_ADMIN_TOKEN;
  if (env.REACH_HOME) {
    const f = join(resolve(env.REACH_HOME), 'admin-token');
    return existsSync(f) ? readFileSync(f, 'utf8').trim() : undefined;
  }
  // `reach up` keeps it in <repo>/.reach/admin-token; look upwards from the working directory.
  for (let dir = process.cwd(); ; dir = dirname(dir)) {
    const f = join(dir, '.reach', 'admin-token');
    if (existsSync(f)) return readFileSync(f, 'utf8').trim();
    if (dirname(dir) === dir) return undefined;
  }
}

/** The local stack's endpoints: REACH_HTTP_HOST and the REACH_*_PORT variables, else docs/design.md §3's defaults. */
export function localStack(env: NodeJS.ProcessEnv = process.env): TestStack {
  const host = !env.REACH_HTTP_HOST || env.REACH_HTTP_HOST === '0.0.0.0' ? '127.0.0.1' : env.REACH_HTTP_HOST;
  const port = (name: string, def: number) => Number(env[name] ?? def);
  // REACH_TLS_CERT set: the stack serves https/wss (docs/transport-security.md).
  const s = env.REACH_TLS_CERT ? 's' : '';
  const tls = stackClientTls({ caFile: env.REACH_CA_FILE, tlsClientCert: env.REACH_TLS_CLIENT_CERT, tlsClientKey: env.REACH_TLS_CLIENT_KEY });
  return {
    registryUrl: `http${s}://${host}:${port('REACH_REGISTRY_PORT', 7411)}`,
    dispatcherUrl: `ws${s}://${host}:${port('REACH_DISPATCHER_PORT', 7412)}/v1/connect`,
    ingressUrl: `http${s}://${host}:${port('REACH_INGRESS_PORT', 7410)}`,
    routerUrl: `http${s}://${host}:${port('REACH_ROUTER_PORT', 7415)}`,
    adminToken: findAdminToken(env),
    schemaRegistryUrl: env.REACH_SCHEMA_REGISTRY_URL ?? `http://${host}:${port('REACH_DEV_SCHEMA_REGISTRY_PORT', 8081)}`,
    ...(tls ? { tls } : {}),
  };
}

/** A ReachClient of the local stack with the admin token (or the given one). */
export function testClient(options: { stack?: TestStack; token?: string } = {}): ReachClient {
  const stack = options.stack ?? localStack();
  return new ReachClient({
    ingressUrl: stack.ingressUrl,
    registryUrl: stack.registryUrl,
    token: options.token ?? stack.adminToken,
    ...(stack.tls ? { tls: stack.tls } : {}),
  });
}

export interface TestAgentOptions {
  /** Merged over a unique `agent_type`; give `agent_id` only to test a fixed id. */
  descriptor?: Partial<AgentDescriptor>;
  /** capability → handler. */
  handlers?: Record<string, Handler>;
  /** topic → handler. */
  subscriptions?: Record<string, Handler>;
  /** Handler for messages addressed to the agent by id. */
  direct?: Handler;
  stack?: TestStack;
  logger?: Logger;
  /** Any other AgentNode option (shorter timeouts, dedupe bounds, ...). */
  node?: Partial<Omit<AgentNodeOptions, 'descriptor' | 'registryUrl' | 'dispatcherUrl' | 'ingressUrl'>>;
}

export interface TestAgent {
  node: AgentNode;
  agentId: string;
  /** Every message a handler of this agent was given, in order. */
  received: ReachMessage[];
  stop(): Promise<void>;
}

const started = new Set<TestAgent>();
/** The router each started agent was started against (a test may run a second stack). */
const routerOf = new WeakMap<TestAgent, string>();

/** Registers and connects an agent with the given handlers; stopTestAgents() cleans it up. */
export async function startTestAgent(options: TestAgentOptions = {}): Promise<TestAgent> {
  const stack = options.stack ?? localStack();
  const received: ReachMessage[] = [];
  const recording =
    (h: Handler): Handler =>
    (msg, ctx) => {
      received.push(msg);
      return h(msg, ctx);
    };
  const node = new AgentNode({
    handleSignals: false,
    ...options.node,
    registryUrl: stack.registryUrl,
    dispatcherUrl: stack.dispatcherUrl,
    ingressUrl: stack.ingressUrl,
    token: options.node?.token ?? stack.adminToken,
    ...(stack.tls ? { tls: stack.tls } : {}),
    logger: options.logger ?? options.node?.logger,
    descriptor: { agent_type: uniqueName('test-agent'), ...options.descriptor },
  });
  for (const [cap, h] of Object.entries(options.handlers ?? {})) node.handle(cap, recording(h));
  for (const [topic, h] of Object.entries(options.subscriptions ?? {})) node.subscribe(topic, recording(h));
  if (options.direct) node.onDirect(recording(options.direct));
  await node.start();
  try {
    await untilViewsAgree(node, stack);
  } catch (err) {
    await node.stop({ drainTimeoutMs: 0 }); // not left running, registered, by a failed start
    throw err;
  }
  const agent: TestAgent = {
    node,
    agentId: node.agentId!,
    received,
    stop: async () => {
      started.delete(agent);
      await node.stop({ drainTimeoutMs: 2000 });
    },
  };
  started.add(agent);
  routerOf.set(agent, stack.routerUrl);
  return agent;
}

export interface RoutableOptions {
  /** Default 10 s. */
  timeoutMs?: number;
  /**
   * Nodes whose own pre-flight view (their dispatcher's `routes` frames, R-G6) must agree
   * with the router before this returns: every name the agent serves is in the view and not
   * 2001 — 0, or 2003/3001 when a domain or a circuit refuses that node, as the router would.
   * Nodes with pre-flight off, and nodes not connected now, have no view to wait for.
   */
  views?: readonly AgentNode[];
  /** Return at once when the router does not route to the agent now (it stopped or is away) instead of waiting for it. */
  ifRoutable?: boolean;
}

interface RouterAgentView {
  status?: string;
  presence?: { connected?: boolean } | null;
  capabilities?: Array<{ name: string; mode?: string }>;
}

/** The names an agent serves: capabilities (mode handle) and topics (mode subscribe). */
export interface Served {
  capabilities: readonly string[];
  topics: readonly string[];
}

/**
 * Which of `nodes` do not yet see `served` (the names of agent `agentId`) as reachable in their
 * local routes view, as `node: name=verdict` — empty once they all agree with a router that
 * routes to the agent.
 */
export function viewsBehind(nodes: Iterable<AgentNode>, agentId: string, served: Served): string[] {
  const behind: string[] = [];
  for (const node of nodes) {
    if (node.agentId === agentId || node.routesView === 'off' || !node.connected) continue;
    for (const [kind, names] of [
      ['capability', served.capabilities],
      ['topic', served.topics],
    ] as const) {
      for (const name of names) {
        const verdict = node.routeVerdict(name, kind);
        if (verdict === undefined || verdict === ERROR.NO_ROUTE) behind.push(`${node.agentId ?? '?'}: ${kind} ${name}=${verdict ?? 'none'}`);
      }
    }
  }
  return behind;
}

/**
 * Routers route from views fed by Kafka (R-A6), a few milliseconds behind the registry and
 * the dispatcher: a test that sends right after start() could race them and see 2001. Waits
 * until the router's view has the agent ONLINE and connected (needs the admin token; without
 * it, returns at once) — and, with `views`, until those nodes' pre-flight views agree, so a
 * request they make is not refused from a view a moment older than the router's.
 */
export async function waitUntilRoutable(agentId: string, stack: TestStack = localStack(), options: number | RoutableOptions = 10_000): Promise<void> {
  const o: RoutableOptions = typeof options === 'number' ? { timeoutMs: options } : options;
  const timeoutMs = o.timeoutMs ?? 10_000;
  if (!stack.adminToken) return;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await fetchFor(stack.tls)(`${stack.routerUrl}/v1/view/agents/${encodeURIComponent(agentId)}`, {
      headers: { authorization: `Bearer ${stack.adminToken}` },
    }).catch(() => undefined);
    let state = `router view: ${res?.status ?? 'unreachable'}`;
    if (res?.ok) {
      const view = (await res.json()) as RouterAgentView;
      if (view.status === 'ONLINE' && view.presence?.connected) {
        const caps = view.capabilities ?? [];
        const served = {
          capabilities: caps.filter((c) => c.mode !== 'subscribe').map((c) => c.name),
          topics: caps.filter((c) => c.mode === 'subscribe').map((c) => c.name),
        };
        const behind = viewsBehind(o.views ?? [], agentId, served);
        if (behind.length === 0) return;
        state = `routable for the router; not yet in the pre-flight views (${behind.join('; ')})`;
      } else if (o.ifRoutable) return;
    } else if (o.ifRoutable && res?.status === 404) return;
    if (Date.now() > deadline) throw new Error(`agent ${agentId} is not routable after ${timeoutMs} ms (${state})`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * A started test agent's node and the router agree, both ways, with the test agents started
 * before it: the router routes to the new agent and their pre-flight views say so; its own view
 * says so of each of them the router routes to.
 */
async function untilViewsAgree(node: AgentNode, stack: TestStack): Promise<void> {
  const others = [...started].filter((a) => a.node !== node && routerOf.get(a) === stack.routerUrl);
  // The first subscription starts a dispatcher's feeds (a Kafka group join): more time than the router alone needs.
  await waitUntilRoutable(node.agentId!, stack, { views: others.map((a) => a.node), timeoutMs: 20_000 });
  for (const other of others) await waitUntilRoutable(other.agentId, stack, { views: [node], ifRoutable: true, timeoutMs: 20_000 });
}

/** Stops every agent startTestAgent() started and has not been stopped (use in afterEach/afterAll). */
export async function stopTestAgents(): Promise<void> {
  await Promise.all([...started].map((a) => a.stop()));
}
