import { ERROR, type Logger } from '@reach/core';
import { AgentNode } from '../agent-node.js';
import { LocalReach, type LocalReachOptions } from '../direct/local-reach.js';
import type { MessageRow, TimelineEntry } from '../direct/timeline.js';
import { modeOf, type ReachMode } from '../mode.js';
import type { AgentNodeOptions, Handler } from '../node-types.js';
import type { AgentInfo, AgentQuery } from '../registry-client.js';
import type { ReachMessage } from '../types.js';
import { localStack, startTestAgent, testClient, uniqueName, type Served, type TestAgent, type TestAgentOptions, type TestStack } from './stack.js';

export interface TestEnvironmentOptions {
  /** `direct`: an in-process LocalReach, no infrastructure. `queued`: the local stack. Default AGENT_REACH_MODE, else direct. */
  mode?: ReachMode;
  /** Direct mode: the LocalReach's options (REACH_* env, timeScale, rules, grants, random). */
  direct?: LocalReachOptions;
  /** Queued mode: the stack (default: localStack(), the one `reach up` runs). */
  stack?: TestStack;
  logger?: Logger;
}

/** What a test submits: the envelope fields of `POST /v1/messages`. */
export type SubmitFields = Record<string, unknown>;

/** A message's row as `GET /v1/messages/{id}` gives it (queued mode has more fields). */
export type MessageState = MessageRow;

/** One entry of `GET /v1/messages/{id}/events`. */
export type TimelineEvent = TimelineEntry;

/**
 * One way to test agents in both modes (issue 28; Temporal's TestWorkflowEnvironment is the
 * model): the same test code starts agents, sends messages and reads their timelines, on an
 * in-process LocalReach (`direct`: starts in milliseconds, control-plane time can be skipped) or
 * on the real stack (`queued`).
 */
export interface TestEnvironment {
  readonly mode: ReachMode;
  /** Direct mode's control plane (faults: loseAnswers, dropConnection; rules; config); undefined when queued. */
  readonly reach: LocalReach | undefined;
  /** Registers and connects an agent with these handlers; it is stopped with the environment. */
  startAgent(options?: TestAgentOptions): Promise<TestAgent>;
  /** A started node with the environment's connection (for options startAgent does not cover). */
  node(options: Omit<AgentNodeOptions, 'mode' | 'reach' | 'registryUrl' | 'dispatcherUrl' | 'ingressUrl'>): AgentNode;
  /** `POST /v1/messages` as a client; `waitMs` waits for the handler's result like `?wait_ms=`. */
  submit(fields: SubmitFields, options?: { waitMs?: number; idempotencyKey?: string }): Promise<MessageState>;
  status(messageId: string): Promise<MessageState | undefined>;
  events(messageId: string): Promise<TimelineEvent[]>;
  /** Resolves once the message's row satisfies `until` (default: a terminal state). */
  waitFor(messageId: string, until?: (row: MessageState) => boolean, timeoutMs?: number): Promise<MessageState>;
  agents(query?: AgentQuery): Promise<AgentInfo[]>;
  /**
   * Lets `ms` of control-plane time pass: in direct mode at once (backoffs, ack deadlines and
   * holds due by then happen now); in queued mode by waiting that long.
   */
  skipTime(ms: number): Promise<void>;
  /** A capability or topic name no other test uses (the registry's grammar: lowercase, `_`). */
  uniqueCapability(verb: string): string;
  /** Stops every agent and node it started (running handlers get `drainTimeoutMs`, default 2 s), then the LocalReach. */
  stop(options?: { drainTimeoutMs?: number }): Promise<void>;
}

const TERMINAL = new Set(['DELIVERED', 'REJECTED', 'DEAD']);
const terminal = (row: MessageState): boolean => TERMINAL.has(row.status);

function recording(received: ReachMessage[], h: Handler): Handler {
  return (msg, ctx) => {
    received.push(msg);
    return h(msg, ctx);
  };
}

export async function createTestEnvironment(options: TestEnvironmentOptions = {}): Promise<TestEnvironment> {
  const mode = options.mode ?? (process.env.AGENT_REACH_MODE ? modeOf() : 'direct');
  return mode === 'direct' ? directEnvironment(options) : queuedEnvironment(options);
}

function uniqueCapability(verb: string): string {
  return `${verb}_${uniqueName('t').replace(/[^a-z0-9]/g, '')}`;
}

/** The names a test agent serves, from its options: handlers and declared capabilities (mode handle), subscriptions (mode subscribe). */
function servedOf(o: TestAgentOptions): Served {
  const declared = (o.descriptor?.capabilities ?? []).map((c) => (typeof c === 'string' ? { name: c, mode: 'handle' } : c));
  return {
    capabilities: [...Object.keys(o.handlers ?? {}), ...declared.filter((c) => c.mode !== 'subscribe').map((c) => c.name)],
    topics: [...Object.keys(o.subscriptions ?? {}), ...declared.filter((c) => c.mode === 'subscribe').map((c) => c.name)],
  };
}

/**
 * Direct mode's counterpart of waitUntilRoutable's `views`: the connected nodes' pre-flight views
 * agree with the LocalReach on every name the test agents serve that it routes or refuses by
 * domain — the view of a node started a moment ago, or of a name registered a moment ago,
 * arrives on the next turn of the bus, and a request made before must not be refused from it.
 */
async function untilViewsAgree(reach: LocalReach, agents: Iterable<{ node: AgentNode; served: Served }>): Promise<void> {
  const all = [...agents];
  const deadline = Date.now() + 5_000;
  for (;;) {
    const behind: string[] = [];
    for (const viewer of all) {
      const id = viewer.node.agentId;
      if (!id || viewer.node.routesView === 'off' || !viewer.node.connected) continue;
      const truth = reach.routesFor(id);
      for (const { served } of all) {
        for (const [kind, names, table] of [
          ['capability', served.capabilities, truth.capabilities],
          ['topic', served.topics, truth.topics],
        ] as const) {
          for (const name of names) {
            const expected = table[name];
            if (expected === undefined || expected === ERROR.NO_ROUTE) continue; // nothing a stale view could refuse wrongly
            const seen = viewer.node.routeVerdict(name, kind);
            if (seen !== expected) behind.push(`${id}: ${kind} ${name}=${seen ?? 'none'}, LocalReach ${expected}`);
          }
        }
      }
    }
    if (behind.length === 0) return;
    if (Date.now() > deadline) throw new Error(`the pre-flight views do not follow the LocalReach (${behind.join('; ')})`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

function directEnvironment(options: TestEnvironmentOptions): TestEnvironment {
  const reach = new LocalReach({ ...(options.logger ? { logger: options.logger } : {}), ...options.direct });
  const agents = new Set<TestAgent>();
  const served = new Map<TestAgent, Served>();
  const nodes = new Set<AgentNode>();
  const node: TestEnvironment['node'] = (nodeOptions) => {
    const n = new AgentNode({ handleSignals: false, ...(options.logger ? { logger: options.logger } : {}), ...nodeOptions, mode: 'direct', reach });
    nodes.add(n);
    return n;
  };
  return {
    mode: 'direct',
    reach,
    async startAgent(o: TestAgentOptions = {}) {
      const received: ReachMessage[] = [];
      const n = node({ ...o.node, ...(o.logger ? { logger: o.logger } : {}), descriptor: { agent_type: uniqueName('test-agent'), ...o.descriptor } });
      for (const [cap, h] of Object.entries(o.handlers ?? {})) n.handle(cap, recording(received, h));
      for (const [topic, h] of Object.entries(o.subscriptions ?? {})) n.subscribe(topic, recording(received, h));
      if (o.direct) n.onDirect(recording(received, o.direct));
      await n.start();
      const agent: TestAgent = {
        node: n,
        agentId: n.agentId!,
        received,
        stop: async () => {
          agents.delete(agent);
          served.delete(agent);
          await n.stop({ drainTimeoutMs: 2000 });
        },
      };
      agents.add(agent);
      served.set(agent, servedOf(o));
      await untilViewsAgree(
        reach,
        [...agents].map((a) => ({ node: a.node, served: served.get(a)! })),
      );
      return agent;
    },
    node,
    submit: async (fields, o = {}) => {
      const withKey = o.idempotencyKey === undefined ? fields : { ...fields, idempotency_key: o.idempotencyKey };
      return reach.submit(withKey, o.waitMs === undefined ? {} : { waitMs: o.waitMs });
    },
    status: async (id) => reach.status(id),
    events: async (id) => reach.events(id),
    waitFor: (id, until = terminal, timeoutMs = 20_000) => reach.waitFor(id, until, timeoutMs),
    agents: async (query) => reach.agents(query),
    skipTime: (ms) => reach.skipTime(ms),
    uniqueCapability,
    async stop({ drainTimeoutMs = 2000 } = {}) {
      await Promise.all([...nodes].map((n) => n.stop({ drainTimeoutMs })));
      agents.clear();
      served.clear();
      reach.close();
    },
  };
}

function queuedEnvironment(options: TestEnvironmentOptions): TestEnvironment {
  const stack = options.stack ?? localStack();
  const client = testClient({ stack });
  const agents = new Set<TestAgent>();
  const nodes = new Set<AgentNode>();
  const status = async (id: string): Promise<MessageState | undefined> => {
    try {
      return (await client.status(id)) as unknown as MessageState;
    } catch {
      return undefined; // not in the read model yet
    }
  };
  return {
    mode: 'queued',
    reach: undefined,
    async startAgent(o: TestAgentOptions = {}) {
      const agent = await startTestAgent({ ...o, stack, ...(o.logger || options.logger ? { logger: o.logger ?? options.logger } : {}) });
      const stop = agent.stop;
      const tracked: TestAgent = {
        ...agent,
        stop: async () => {
          agents.delete(tracked);
          await stop();
        },
      };
      agents.add(tracked);
      return tracked;
    },
    node(nodeOptions) {
      const n = new AgentNode({
        handleSignals: false,
        token: stack.adminToken,
        ...(options.logger ? { logger: options.logger } : {}),
        ...nodeOptions,
        mode: 'queued',
        registryUrl: stack.registryUrl,
        dispatcherUrl: stack.dispatcherUrl,
        ingressUrl: stack.ingressUrl,
        ...(stack.tls ? { tls: stack.tls } : {}),
      });
      nodes.add(n);
      return n;
    },
    submit: async (fields, o = {}) => {
      const out = await client.submit(fields as Parameters<typeof client.submit>[0], {
        ...(o.waitMs === undefined ? {} : { waitMs: o.waitMs }),
        ...(o.idempotencyKey === undefined ? {} : { idempotencyKey: o.idempotencyKey }),
      });
      return out as unknown as MessageState;
    },
    status,
    events: async (id) => (await client.events(id)) as unknown as TimelineEvent[],
    async waitFor(id, until = terminal, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const row = await status(id);
        if (row && until(row)) return row;
        if (Date.now() > deadline) throw new Error(`message ${id} is ${row ? `${row.status} (attempt ${row.attempt})` : 'unknown'} after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    agents: (query) => client.agents(query ?? {}),
    skipTime: (ms) => new Promise((r) => setTimeout(r, ms)),
    uniqueCapability,
    async stop({ drainTimeoutMs = 2000 } = {}) {
      await Promise.all([...agents].map((a) => a.node.stop({ drainTimeoutMs })));
      await Promise.all([...nodes].map((n) => n.stop({ drainTimeoutMs })));
      agents.clear();
    },
  };
}
