import { ReachError, newId, signToken, type Logger } from '@reach/core';
import type { AgentLoad, AgentRecord } from '@reach/envelope';
import {
  agentRecordToJson,
  heartbeatIntervalMs,
  leaseDurationMs,
  qosScore,
  statusForLoad,
  statusForQos,
  validateDescriptor,
  generateAgentId,
  invalidRegistration,
  type AgentDescriptor,
  type DescriptorRules,
} from '@reach/agents';
import type { AuditLog, HttpServer, Reply, Request, RevokedTokenView } from '@reach/service-kit';
import type { AgentStore } from './agent-store.js';
import type { AgentFeed } from './agent-feed.js';
import { visibleAgent, type Viewer } from './agent-visibility.js';
import { authorizeAgent, authorizeRegistration, identifyCaller, type AuthSecrets } from './auth.js';
import type { DomainGrant } from './grants.js';
import { revokeAgentTokens } from './token-api.js';
import type { TokenStore } from './token-store.js';
import { parseHeartbeat } from './heartbeat-body.js';
import type { RegistryMetrics } from './registry-metrics.js';

export interface AgentApiConfig {
  secrets: AuthSecrets;
  tokenTtlS: number;
  missedHeartbeats: number;
  cooldownQos: number;
  rules: DescriptorRules;
  /** How long a request waits for its change to reach reach.agents.v1 before answering 503. */
  publishTimeoutMs: number;
}

export interface AgentApiDeps {
  store: AgentStore;
  feed: AgentFeed;
  log: Logger;
  metrics: RegistryMetrics;
  config: AgentApiConfig;
  /** Issued and revoked tokens (PostgreSQL). */
  tokens: TokenStore;
  /** Revoked token ids this instance refuses. */
  revoked: RevokedTokenView;
  /** The grants from a domain to others (what its agents may see of other domains). */
  grantsFrom(domain: string): Promise<readonly DomainGrant[]>;
  /** Deleting an agent is an action of the audit trail (by the admin or the agent itself). */
  audit: AuditLog;
}

/** A fresh agent has done no work yet. */
const IDLE: AgentLoad = { current_load: 0, queue_length: 0, avg_latency_ms: 0, health: 1 };

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function unknownAgent(id: string): ReachError {
  return new ReachError('NO_ROUTE', `no agent ${id} is registered`, { details: { agent_id: id } });
}

/** The body as JSON; malformed JSON is the caller's descriptor error (4104), not an envelope's. */
async function jsonBody(req: Request): Promise<unknown> {
  try {
    return await req.json();
  } catch (err) {
    if (err instanceof ReachError && err.codeName === 'INVALID_ENVELOPE') throw invalidRegistration('body', err.message);
    throw err;
  }
}

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new ReachError('DEPENDENCY_UNAVAILABLE', `${what} did not complete within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The public agent API of docs/design.md §3 on the registry: register, heartbeat, deregister, list,
 * show. Every change is in Redis (atomically) and on reach.agents.v1 before the answer.
 */
export function mountAgentApi(http: HttpServer, deps: AgentApiDeps): void {
  const { store, feed, log, metrics, config, tokens, revoked } = deps;
  const enrollmentRequired = config.secrets.enrollmentToken !== undefined;
  const callerOf = (req: Request, now = Date.now()) => identifyCaller(req.headers.authorization, config.secrets, now, (jti) => revoked.has(jti));

  const published = (agentId: string) => withTimeout(feed.publish(agentId), config.publishTimeoutMs, 'publishing to reach.agents.v1');

  async function register(req: Request): Promise<Reply> {
    const now = Date.now();
    const caller = callerOf(req, now);
    // Without the enrollment token there is nothing to validate for this caller.
    if (caller.kind === 'anonymous' && enrollmentRequired) authorizeRegistration(caller, '', true);
    const body = await jsonBody(req);
    const { descriptor, warnings } = validateDescriptor(body, config.rules);
    const givenId = (body as { agent_id?: unknown }).agent_id;
    const idGenerated = givenId === undefined || givenId === null || givenId === '';
    const grant = authorizeRegistration(caller, descriptor.agent_id, enrollmentRequired);

    const qos = qosScore(IDLE, descriptor.metadata.max_concurrency);
    const leaseMs = leaseDurationMs(descriptor.ttl_s, config.missedHeartbeats);
    const leaseId = newId('lease', now);
    const attempt = (d: AgentDescriptor) =>
      store.register({
        descriptor: d,
        leaseId,
        nowMs: now,
        leaseMs,
        status: statusForQos(qos, config.cooldownQos),
        load: IDLE,
        qos,
        mustNotExist: grant.mustNotExist,
      });
    let result = await attempt(descriptor);
    if (result === 'exists' && idGenerated) {
      // A generated id collided with a live agent (3 random bytes): draw another one.
      descriptor.agent_id = generateAgentId(descriptor.agent_type);
      result = await attempt(descriptor);
    }
    if (result === 'exists') {
      throw new ReachError('AUTH_FAILED', `agent ${descriptor.agent_id} is already registered; re-registering it needs its own token or the admin token`, {
        details: { agent_id: descriptor.agent_id },
      });
    }
    const id = descriptor.agent_id;
    metrics.registrations.inc({ outcome: result.replaced ? 'replaced' : 'new' });
    log.info(
      {
        agent_id: id,
        revision: result.revision,
        replaced: result.replaced,
        capabilities: descriptor.capabilities.map((c) => c.name),
        domain: descriptor.metadata.domain,
        caller: caller.kind,
      },
      result.replaced ? 'agent re-registered' : 'agent registered',
    );
    await published(id);

    const iat = Math.floor(now / 1000);
    const jti = newId('tok', now);
    // Recorded before it is handed out: a token the registry cannot list cannot be revoked with its agent.
    await tokens.issued(jti, id, (iat + config.tokenTtlS) * 1000);
    const token = signToken({ sub: id, jti, iat, exp: iat + config.tokenTtlS, dom: descriptor.metadata.domain ?? 'default' }, config.secrets.tokenSecret);
    return {
      status: 201,
      body: {
        agent_id: id,
        lease_id: leaseId,
        token,
        ttl_s: descriptor.ttl_s,
        heartbeat_interval_ms: heartbeatIntervalMs(descriptor.ttl_s),
        lease_expires_at: iso(now + leaseMs),
        token_expires_at: iso((iat + config.tokenTtlS) * 1000),
        ...(warnings.length > 0 ? { warnings } : {}),
      },
    };
  }

  async function heartbeat(req: Request): Promise<Reply> {
    const id = req.params.id!;
    authorizeAgent(callerOf(req), id);
    const body = await jsonBody(req);
    // Optimistic: QoS depends on the registered max_concurrency, so the write is refused if
    // the agent re-registered after this read, and computed again.
    for (let attempt = 0; attempt < 5; attempt++) {
      const current = await store.get(id);
      if (!current) throw unknownAgent(id);
      const load = parseHeartbeat(body, current.load);
      const qos = qosScore(load, current.metadata.max_concurrency);
      const status = statusForLoad(load, current.metadata.max_concurrency, config.cooldownQos);
      const now = Date.now();
      const leaseMs = leaseDurationMs(current.ttl_s, config.missedHeartbeats);
      const result = await store.heartbeat({ agentId: id, leaseId: current.lease_id, nowMs: now, leaseMs, status, load, qos });
      if (result === 'stale') continue;
      if (!result) throw unknownAgent(id);
      metrics.heartbeats.inc({ status });
      if (status !== result.previous) {
        if (status === 'COOLDOWN') metrics.cooldownTransitions.inc();
        log.info({ agent_id: id, from: result.previous, to: status, qos, revision: result.revision }, 'agent status changed by heartbeat');
      }
      await published(id);
      return {
        status: 200,
        body: {
          agent_id: id,
          lease_expires_at: iso(now + leaseMs),
          status,
          qos,
          revision: result.revision,
          heartbeat_interval_ms: heartbeatIntervalMs(current.ttl_s),
        },
      };
    }
    throw new ReachError('INTERNAL', `agent ${id} kept re-registering while its heartbeat was applied; send it again`);
  }

  async function deregister(req: Request): Promise<Reply> {
    const id = req.params.id!;
    authorizeAgent(callerOf(req), id);
    // Its tokens die with the registration (first: when PostgreSQL is away nothing changes and
    // the caller may try again). A record produced just before still waiting in
    // reach.ingress.v1 is refused by ingress once it sees the revocation.
    const revokedTokens = await revokeAgentTokens({ tokens, revoked }, id);
    if (!(await store.deregister(id))) throw unknownAgent(id);
    metrics.deregistrations.inc();
    log.info({ agent_id: id, revoked_tokens: revokedTokens.length }, 'agent deregistered');
    await published(id); // the agent is gone from Redis: this is its tombstone
    return { status: 200, body: { agent_id: id, status: 'DEREGISTERED' } };
  }

  /**
   * Listings need a token (issue #13): the admin sees all, an agent what agent-visibility.ts
   * allows; no token or an invalid one is 401, the enrollment token (not an agent) 403.
   */
  async function viewerOf(req: Request): Promise<Viewer | Reply> {
    const caller = callerOf(req);
    switch (caller.kind) {
      case 'admin':
        return { admin: true };
      case 'agent':
        return { admin: false, domain: caller.claims.dom, grants: await deps.grantsFrom(caller.claims.dom) };
      case 'anonymous':
        throw new ReachError('AUTH_FAILED', 'listing agents needs a token: an agent token or the admin token (Authorization: Bearer …)');
      case 'enrollment':
        return {
          status: 403,
          body: new ReachError('AUTH_FAILED', 'the enrollment token may not list agents: it needs an agent token or the admin token').toBody(),
        };
    }
  }

  async function list(req: Request): Promise<Reply> {
    const viewer = await viewerOf(req);
    if ('status' in viewer) return viewer;
    const capability = req.query.get('capability');
    const statuses = req.query
      .get('status')
      ?.split(',')
      .map((s) => s.trim().toUpperCase())
      .filter(Boolean);
    const domain = req.query.get('domain');
    const ids = capability ? await store.capabilityMembers(capability) : await store.allAgentIds();
    const records = (await store.getMany(ids.sort())).filter((r): r is AgentRecord => r !== undefined);
    const now = Date.now();
    const agents = records
      .filter((r) => !statuses?.length || statuses.includes(r.status))
      .filter((r) => !domain || r.metadata.domain === domain)
      .map((r) => visibleAgent(r, viewer))
      .filter((r): r is AgentRecord => r !== undefined)
      .map((r) => agentRecordToJson(r, now));
    return { status: 200, body: { agents } };
  }

  async function show(req: Request): Promise<Reply> {
    const viewer = await viewerOf(req);
    if ('status' in viewer) return viewer;
    const id = req.params.id!;
    const stored = await store.get(id);
    // An agent the caller may not see answers exactly like an unknown one.
    const record = stored && visibleAgent(stored, viewer);
    if (!record) throw unknownAgent(id);
    return { status: 200, body: agentRecordToJson(record) };
  }

  http
    .route('POST', '/v1/agents', register)
    .route('GET', '/v1/agents', list)
    .route('GET', '/v1/agents/{id}', show)
    .route('DELETE', '/v1/agents/{id}', deps.audit.wrap('agent.delete', 'id', deregister))
    .route('POST', '/v1/agents/{id}/heartbeat', heartbeat);
}
