import type { Producer } from 'kafkajs';
import type { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import { adminToken, urls } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';
import { testEnvelope } from '../../helpers/envelope.js';
import { TestAgent, messageIdOf, type Frame } from './harness.js';

/**
 * Helpers of the per-target concurrency and priority-lane tests (R-D7, R-D9): agents
 * registered with a given max_concurrency, the dispatcher's view of an agent's flow
 * (`GET /v1/agents/{id}/deliveries`), routed deliveries with a chosen ack window and budget,
 * and an agent that answers only when the test says so.
 */

/** Registers an agent (admin token) and returns its token. */
export async function registerAgent(id: string, maxConcurrency: number): Promise<string> {
  const res = await fetch(`${urls.registry}/v1/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${adminToken()}` },
    body: JSON.stringify({ agent_id: id, agent_type: 'it.flow', capabilities: [], metadata: { max_concurrency: maxConcurrency }, ttl_s: 600 }),
  });
  if (res.status !== 201) throw new Error(`registering ${id} failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}

export async function deregisterAgent(id: string): Promise<void> {
  await fetch(`${urls.registry}/v1/agents/${encodeURIComponent(id)}`, { method: 'DELETE', headers: { authorization: `Bearer ${adminToken()}` } }).catch(
    () => undefined,
  );
}

export interface Flow {
  agent_id: string;
  max_concurrency: number | null;
  in_flight: number;
  waiting: { HIGH: number; NORMAL: number; LOW: number };
}

export async function flowOf(id: string, base: string = urls.dispatcher): Promise<Flow> {
  const res = await fetch(`${base}/v1/agents/${encodeURIComponent(id)}/deliveries`, { headers: { authorization: `Bearer ${adminToken()}` } });
  if (res.status !== 200) throw new Error(`flow of ${id}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Flow;
}

/**
 * How long a test waits for the dispatcher to consume what it routed: the group
 * `reach-dispatcher` is shared with other tests' instances, and a rebalance pauses it for
 * seconds.
 */
export const CONSUME_PATIENCE_MS = 45_000;

/** Waits until the dispatcher (at `base`) sees the flow `pred` describes. */
export function waitForFlow(
  id: string,
  what: string,
  pred: (f: Flow) => boolean,
  base: string = urls.dispatcher,
  timeoutMs = CONSUME_PATIENCE_MS,
): Promise<Flow> {
  return eventually(
    what,
    async () => {
      const f = await flowOf(id, base);
      return pred(f) ? f : undefined;
    },
    timeoutMs,
    50,
  );
}

/** Produces RoutedDelivery records the way the router does, with the ack window and budget the test needs. */
export class FlowRouter {
  private schemaId = 0;

  constructor(
    private readonly producer: Producer,
    private readonly registry: SchemaRegistry,
    private readonly ackWindowMs = 60_000,
  ) {}

  async init(): Promise<this> {
    this.schemaId = await this.registry.getLatestSchemaId('reach.routed.v1-value');
    return this;
  }

  envelope(overrides: Record<string, unknown> = {}): Record<string, unknown> {
    return testEnvelope({ capability: 'it_flow', producer: 'it.sender', ...overrides });
  }

  async routeMany(agent: string, envelopes: ReadonlyArray<Record<string, unknown>>): Promise<void> {
    const now = Date.now();
    const messages = await Promise.all(
      envelopes.map(async (env) => ({
        key: agent,
        value: await this.registry.encode(this.schemaId, {
          message_id: env.message_id,
          parent_message_id: null,
          agent_id: agent,
          attempt: 0,
          routed_at: now,
          deadline_at: now + this.ackWindowMs,
          // As the router computes it: the end of the budget, at most expire_at.
          budget_deadline_at: (env.expire_at as number | null) ?? null,
          rule: null,
          envelope: env,
        }),
      })),
    );
    await this.producer.send({ topic: 'reach.routed.v1', acks: -1, messages });
  }
}

/**
 * Watches an agent's deliveries and acks: `unacked` is what it holds (received, not answered),
 * and `maxUnacked` the most it ever held when a delivery arrived.
 */
export class Holder {
  readonly received: Frame[] = [];
  maxUnacked = 0;
  private acked = 0;
  private seen = 0;

  constructor(readonly agent: TestAgent) {}

  /** Counts the deliveries that arrived since the last call (frames are recorded in order). */
  private update(): void {
    const deliveries = this.agent.deliveries();
    for (; this.seen < deliveries.length; this.seen++) {
      this.received.push(deliveries[this.seen]!);
      this.maxUnacked = Math.max(this.maxUnacked, this.received.length - this.acked);
    }
  }

  get unacked(): number {
    this.update();
    return this.received.length - this.acked;
  }

  /** Waits for the n-th delivery (1-based) and returns it. */
  async nth(n: number, timeoutMs = CONSUME_PATIENCE_MS): Promise<Frame> {
    await this.agent.waitCount((f) => f.type === 'deliver', n, timeoutMs);
    this.update();
    return this.received[n - 1]!;
  }

  ack(f: Frame): void {
    this.update();
    this.acked++;
    this.agent.send({ type: 'ack', seq: f.seq, message_id: messageIdOf(f) });
  }
}
