import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import type { AgentRecord, Envelope } from '@reach/envelope';
import { AgentIndex, rendezvousPick, routeMessage, type RouteHints } from '@reach/routing';
import { RedisStickyStore } from '../../../services/router/src/redis-sticky.js';
import { stack, uniq } from '../../helpers/env.js';
import { envelopeOf } from '../../helpers/envelope.js';

// R-D12 / R-B6: with Redis away, routing of a session goes on (hashed over the candidates)
// and fails fast instead of waiting for Redis. Two real failure modes: nothing listens on the
// port (connection refused), and a server that accepts the connection but never answers.
const hints: RouteHints = { attempt: 0, excludeAgents: [], preferredAgent: undefined, rejectOnSaturation: false, capabilityTags: [] };
const config = {
  weightPriority: 0.4,
  weightHealth: 0.3,
  weightLoad: 0.2,
  weightLocality: 0.1,
  jitter: 0.05,
  region: '',
  hotspotCandidates: 20,
  topK: 5,
  saturation: 0.8,
  stickyTtlS: 60,
};

function agentRecord(id: string, capability: string): AgentRecord {
  const now = Date.now();
  return {
    agent_id: id,
    agent_type: 't',
    status: 'ONLINE',
    revision: 1,
    lease_id: 'l',
    lease_expires_at: now + 60_000,
    ttl_s: 60,
    endpoints: { ws: null, http: 'http://127.0.0.1:9/x', protocol_version: '1' },
    capabilities: [{ name: capability, version: null, mode: 'handle', tags: [], consumption: 'single', scope_json: null, constraints_json: null }],
    metadata: { max_concurrency: 10, region: null, timezone: null, model: null, domain: 'default', weight: 1, extra: {} },
    load: { current_load: 0, queue_length: 0, avg_latency_ms: 0, health: 1 },
    qos: 1,
    registered_at: now,
    updated_at: now,
  };
}

function message(capability: string, session: string): Envelope {
  return envelopeOf({ capability, session_id: session });
}

let silent: Server;
let silentPort = 0;

beforeAll(async () => {
  // Accepts connections and never says a word: a hung Redis.
  silent = createServer(() => undefined);
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
  silentPort = (silent.address() as { port: number }).port;
});

afterAll(async () => {
  await new Promise<void>((r) => silent.close(() => r()));
});

describe('router stickiness when Redis is down', () => {
  for (const [name, url] of [
    ['connection refused', 'redis://127.0.0.1:1/0'],
    ['a server that never answers', () => `redis://127.0.0.1:${silentPort}/0`],
  ] as const) {
    it(`keeps routing sessions by hash: ${name}`, async () => {
      const store = new RedisStickyStore(typeof url === 'string' ? url : url(), silentLogger);
      try {
        const capability = uniq('cap');
        const index = new AgentIndex();
        for (const id of ['a', 'b', 'c']) index.upsertAgent(agentRecord(id, capability));
        for (let i = 0; i < 20; i++) {
          const session = `s${i}`;
          const d = await routeMessage(message(capability, session), hints, { index, config, sticky: store, rng: Math.random }, Date.now());
          expect(d.kind).toBe('routed');
          if (d.kind !== 'routed') return;
          expect(d.trace.strategy).toBe('sticky_hash');
          expect(d.agentId).toBe(rendezvousPick(session, ['a', 'b', 'c']));
        }
      } finally {
        await store.close();
      }
    });
  }

  it('uses the Redis binding when Redis is up', async () => {
    const store = new RedisStickyStore(stack.redisUrl, silentLogger);
    try {
      const deadline = Date.now() + 5_000;
      while (!store.ready && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      const capability = uniq('cap');
      const index = new AgentIndex();
      for (const id of ['a', 'b', 'c']) index.upsertAgent(agentRecord(id, capability));
      const deps = { index, config, sticky: store, rng: Math.random };
      const first = await routeMessage(message(capability, 'sess'), hints, deps, Date.now());
      const second = await routeMessage(message(capability, 'sess'), hints, deps, Date.now());
      expect(first.kind === 'routed' && second.kind === 'routed' && second.agentId === first.agentId).toBe(true);
      expect(second.kind === 'routed' && second.trace.strategy).toBe('sticky');
      expect(await store.get(`reach:sticky:${capability}:sess`)).toBe(first.kind === 'routed' ? first.agentId : null);
    } finally {
      await store.close();
    }
  });
});
