import { isA2aAgent } from '@reach/a2a';
import { leaseDurationMs, qosScore, statusForLoad } from '@reach/agents';
import { A2A_VERSION_HEADER, type Logger } from '@reach/core';
import type { AgentRecord } from '@reach/envelope';
import type { Redis } from '@reach/store';
import type { AgentFeed } from './agent-feed.js';
import type { AgentStore } from './agent-store.js';
import type { RegistryMetrics } from './registry-metrics.js';

/**
 * A2A agents send no heartbeats (docs/a2a.md): the registry probes each one instead, every
 * REACH_A2A_PROBE_MS — its Agent Card, and a cheap JSON-RPC call (GetTask of a task nobody has,
 * which a live A2A server answers with TaskNotFoundError) — and a probe that succeeds renews
 * its lease as a heartbeat would. An agent that stops answering keeps no lease: the lease
 * sweeper marks it OFFLINE at its deadline, and it leaves candidacy like any agent whose
 * heartbeats stopped. One registry instance probes each agent per round (a Redis claim).
 */
export interface A2aProberOptions {
  store: AgentStore;
  feed: AgentFeed;
  redis: Redis;
  log: Logger;
  metrics: RegistryMetrics;
  intervalMs: number;
  missedHeartbeats: number;
  cooldownQos: number;
  /** How long one probe request may take. */
  timeoutMs: number;
}

const claimKey = (agentId: string) => `reach:a2a-probe:{${agentId}}`;

/** The card URL an imported agent names (metadata.extra.a2a_card), else the well-known one at its endpoint's origin. */
export function cardUrlOf(record: AgentRecord): string {
  return record.metadata.extra.a2a_card ?? new URL('/.well-known/agent-card.json', record.endpoints.http!).toString();
}

/** Is the agent alive? Its card loads and its JSON-RPC endpoint answers a JSON-RPC response. */
export async function probeA2aAgent(record: AgentRecord, timeoutMs: number): Promise<{ alive: true } | { alive: false; why: string }> {
  try {
    const card = await fetch(cardUrlOf(record), { headers: { [A2A_VERSION_HEADER]: '1.0' }, signal: AbortSignal.timeout(timeoutMs) });
    if (card.status !== 200) return { alive: false, why: `card: HTTP ${card.status}` };
    const body = (await card.json()) as { skills?: unknown };
    if (!Array.isArray(body.skills)) return { alive: false, why: 'card: not an Agent Card' };
    const rpc = await fetch(record.endpoints.http!, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [A2A_VERSION_HEADER]: '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'reach-probe', method: 'GetTask', params: { id: 'reach-probe-no-such-task' } }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const answer = (await rpc.json().catch(() => undefined)) as { jsonrpc?: unknown; result?: unknown; error?: unknown } | undefined;
    if (answer?.jsonrpc !== '2.0' || (answer.result === undefined && answer.error === undefined))
      return { alive: false, why: `JSON-RPC: HTTP ${rpc.status}, no JSON-RPC answer` };
    return { alive: true };
  } catch (err) {
    return { alive: false, why: (err as Error).name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : (err as Error).message };
  }
}

export function startA2aProber(o: A2aProberOptions): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;

  /** A successful probe is a heartbeat with the load the agent last had (none: an idle agent). */
  const renew = async (record: AgentRecord): Promise<void> => {
    const qos = qosScore(record.load, record.metadata.max_concurrency);
    const status = statusForLoad(record.load, record.metadata.max_concurrency, o.cooldownQos);
    const leaseMs = leaseDurationMs(record.ttl_s, o.missedHeartbeats);
    const result = await o.store.heartbeat({ agentId: record.agent_id, leaseId: record.lease_id, nowMs: Date.now(), leaseMs, status, load: record.load, qos });
    if (result && result !== 'stale') {
      if (result.previous !== status) o.log.info({ agent_id: record.agent_id, from: result.previous, to: status }, 'A2A agent answers its probe again');
      await o.feed.publish(record.agent_id);
    }
  };

  const round = async (): Promise<void> => {
    const ids = await o.store.allAgentIds();
    const records = (await o.store.getMany(ids)).filter((r): r is AgentRecord => r !== undefined && isA2aAgent(r));
    await Promise.all(
      records.map(async (record) => {
        // One instance per agent per round.
        const claimed = await o.redis.set(claimKey(record.agent_id), '1', 'PX', Math.max(1, o.intervalMs - 100), 'NX');
        if (claimed !== 'OK') return;
        const probe = await probeA2aAgent(record, o.timeoutMs);
        o.metrics.a2aProbes.inc({ outcome: probe.alive ? 'alive' : 'dead' });
        if (probe.alive) await renew(record);
        else
          o.log.warn(
            { agent_id: record.agent_id, endpoint: record.endpoints.http, why: probe.why },
            'A2A agent did not answer its probe; its lease is not renewed',
          );
      }),
    );
  };

  const timer = setInterval(() => {
    if (running) return;
    running = round()
      .catch((err: unknown) => o.log.warn({ err }, 'A2A probe round failed'))
      .finally(() => (running = undefined));
  }, o.intervalMs);
  timer.unref();
  return {
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}
