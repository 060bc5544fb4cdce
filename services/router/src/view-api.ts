import { bearer, ReachError, sameSecret } from '@reach/core';
import type { HttpServer } from '@reach/service-kit';
import { loadRate, type AgentIndex } from '@reach/routing';

/**
 * Admin, read-only: what THIS router instance sees of the registry. Each router routes from its
 * own local view (SPEC R-A6), so "why did it (not) route there?" starts with what the view
 * held: revision, status, lease, load rate, presence, circuit. Needs the admin token.
 */
export function registerViewApi(
  http: HttpServer,
  index: AgentIndex,
  adminToken: string | undefined,
  /** The agent's circuit in this router's local map (closed, open, half_open). */
  circuitOf?: (agentId: string) => string,
): void {
  const admin = (authorization: string | string[] | undefined): void => {
    if (!sameSecret(bearer(authorization), adminToken)) throw new ReachError('AUTH_FAILED', 'the admin token is required');
  };
  http.route('GET', '/v1/view', (req) => {
    admin(req.headers.authorization);
    return { status: 200, body: { agents: index.size } };
  });
  http.route('GET', '/v1/view/agents/{id}', (req) => {
    admin(req.headers.authorization);
    const id = req.params.id!;
    const agent = index.agent(id);
    if (!agent) throw new ReachError('NO_ROUTE', `agent ${id} is not in this router's view`);
    const presence = index.presenceOf(id);
    return {
      status: 200,
      body: {
        agent_id: agent.agent_id,
        revision: agent.revision,
        status: agent.status,
        lease_expires_at: new Date(agent.lease_expires_at).toISOString(),
        load_rate: loadRate(agent),
        ...(circuitOf ? { circuit: circuitOf(id) } : {}),
        health: agent.load.health,
        capabilities: agent.capabilities.map((c) => ({ name: c.name, mode: c.mode, version: c.version, tags: c.tags })),
        presence: presence
          ? { connected: presence.connected, dispatcher_instance: presence.dispatcher_instance, at: new Date(presence.at).toISOString() }
          : null,
      },
    };
  });
}
