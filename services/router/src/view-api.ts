import { ReachError } from '@reach/core';
import { adminOnly, type AdminSecrets, type HttpServer, type Reply, type Request } from '@reach/service-kit';
import type { Grant } from '@reach/envelope';
import { loadRate, type AgentIndex } from '@reach/routing';

/**
 * Admin, read-only: what THIS router instance sees of the registry. Each router routes from its
 * own local view (R-A6), so "why did it (not) route there?" starts with what the view
 * held: revision, status, lease, load rate, presence, circuit. Needs the admin token.
 */
export function registerViewApi(
  http: HttpServer,
  index: AgentIndex,
  secrets: AdminSecrets,
  /** The agent's circuit in this router's local map (closed, open, half_open). */
  circuitOf?: (agentId: string) => string,
  /** The cross-domain grants this router holds (R-A8). */
  grants?: () => Iterable<Grant>,
): void {
  const admin =
    (handler: (req: Request) => Reply) =>
    (req: Request): Reply =>
      adminOnly(req.headers.authorization, secrets, "the router's view API") ?? handler(req);

  http.route(
    'GET',
    '/v1/view',
    admin(() => ({ status: 200, body: { agents: index.size } })),
  );
  http.route(
    'GET',
    '/v1/view/grants',
    admin(() => {
      const list = [...(grants?.() ?? [])].map((g) => ({ grant_id: g.grant_id, from_domain: g.from_domain, to_domain: g.to_domain, capability: g.capability }));
      return { status: 200, body: { grants: list } };
    }),
  );
  http.route(
    'GET',
    '/v1/view/agents/{id}',
    admin((req) => {
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
          domain: agent.metadata.domain ?? 'default',
          capabilities: agent.capabilities.map((c) => ({ name: c.name, mode: c.mode, version: c.version, tags: c.tags })),
          presence: presence
            ? { connected: presence.connected, dispatcher_instance: presence.dispatcher_instance, at: new Date(presence.at).toISOString() }
            : null,
        },
      };
    }),
  );
}
