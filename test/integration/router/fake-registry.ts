import type { Producer } from 'kafkajs';
import type { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import { uniq } from '../../helpers/env.js';
import { testEnvelope } from '../../helpers/envelope.js';

/**
 * Plays the registry and the dispatcher for the router's integration tests: writes AgentRecord
 * and Presence records of unique fake agents to the compacted feeds, the way those services
 * would, so each test controls status, load and reachability exactly. Leases are short and
 * nothing is deleted: the fake agents simply expire.
 */
export interface FakeCapability {
  name: string;
  mode?: 'handle' | 'subscribe';
  tags?: string[];
  version?: string | null;
}

export interface FakeAgent {
  id: string;
  capabilities: FakeCapability[];
  status?: 'ONLINE' | 'COOLDOWN' | 'OFFLINE';
  maxConcurrency?: number;
  currentLoad?: number;
  health?: number;
  weight?: number;
  revision?: number;
  connected?: boolean;
}

export class FakeRegistry {
  private agentsId = 0;
  private presenceId = 0;
  private pendingId = 0;
  private retryId = 0;

  constructor(
    private readonly producer: Producer,
    private readonly registry: SchemaRegistry,
  ) {}

  async init(): Promise<this> {
    [this.agentsId, this.presenceId, this.pendingId, this.retryId] = await Promise.all([
      this.registry.getLatestSchemaId('reach.agents.v1-value'),
      this.registry.getLatestSchemaId('reach.presence.v1-value'),
      this.registry.getLatestSchemaId('reach.pending.v1-value'),
      this.registry.getLatestSchemaId('reach.retry.v1-value'),
    ]);
    return this;
  }

  agentRecord(a: FakeAgent): Record<string, unknown> {
    const now = Date.now();
    return {
      agent_id: a.id,
      agent_type: 'it-fake',
      status: a.status ?? 'ONLINE',
      revision: a.revision ?? 1,
      lease_id: `lease-${a.id}`,
      lease_expires_at: now + 5 * 60_000,
      ttl_s: 300,
      endpoints: { ws: null, http: null, protocol_version: '1' },
      capabilities: a.capabilities.map((c) => ({
        name: c.name,
        version: c.version ?? null,
        mode: c.mode ?? 'handle',
        tags: c.tags ?? [],
        consumption: 'single',
        scope_json: null,
        constraints_json: null,
      })),
      metadata: { max_concurrency: a.maxConcurrency ?? 10, region: null, timezone: null, model: null, domain: 'default', weight: a.weight ?? 1, extra: {} },
      load: { current_load: a.currentLoad ?? 0, queue_length: 0, avg_latency_ms: 0, health: a.health ?? 1 },
      qos: 1,
      registered_at: now,
      updated_at: now,
    };
  }

  /** Publishes the agents (and, unless connected: false, their presence) and waits for the acks. */
  async publish(...agents: FakeAgent[]): Promise<void> {
    const agentMsgs = await Promise.all(agents.map(async (a) => ({ key: a.id, value: await this.registry.encode(this.agentsId, this.agentRecord(a)) })));
    const presenceMsgs = await Promise.all(
      agents.map(async (a) => ({
        key: a.id,
        value: await this.registry.encode(this.presenceId, {
          agent_id: a.id,
          connected: a.connected ?? true,
          dispatcher_instance: 'it-fake-dispatcher',
          connection_id: `conn-${a.id}`,
          at: Date.now(),
        }),
      })),
    );
    await this.producer.sendBatch({
      acks: -1,
      topicMessages: [
        { topic: 'reach.agents.v1', messages: agentMsgs },
        { topic: 'reach.presence.v1', messages: presenceMsgs },
      ],
    });
  }

  /** Writes an envelope to reach.pending.v1 as ingress would (key session_id ?? message_id). */
  async sendPending(env: Record<string, unknown>, headers: Record<string, string> = {}): Promise<void> {
    const key = (env.session_id as string | null) ?? (env.message_id as string);
    await this.producer.send({ topic: 'reach.pending.v1', acks: -1, messages: [{ key, value: await this.registry.encode(this.pendingId, env), headers }] });
  }

  /** Writes a RetryRequest to reach.retry.v1, optionally to one partition. */
  async sendRetry(req: Record<string, unknown>, partition?: number): Promise<void> {
    await this.producer.send({
      topic: 'reach.retry.v1',
      acks: -1,
      messages: [{ key: req.message_id as string, value: await this.registry.encode(this.retryId, req), ...(partition !== undefined ? { partition } : {}) }],
    });
  }
}

export function envelope(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return testEnvelope({ producer: uniq('it.producer'), payload: Buffer.from('{"it":true}'), ...overrides });
}

/**
 * Waits until the running router's local view holds each agent at (at least) its revision, so
 * a message sent next is routed with it. Polls the router's admin view API.
 */
export async function routerSees(routerUrl: string, token: string, agents: FakeAgent[], timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (const a of agents) {
    for (;;) {
      const res = await fetch(`${routerUrl}/v1/view/agents/${encodeURIComponent(a.id)}`, { headers: { authorization: `Bearer ${token}` } });
      if (res.ok) {
        const body = (await res.json()) as { revision: number; presence: { connected: boolean } | null };
        if (body.revision >= (a.revision ?? 1) && body.presence?.connected === (a.connected ?? true)) break;
      } else await res.body?.cancel();
      if (Date.now() > deadline) throw new Error(`router did not see ${a.id} at revision ${a.revision ?? 1} within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
