import type { TokenSecret } from '@reach/core';
import type { AgentRecord } from '@reach/envelope';
import type { TableView } from '@reach/kafka';
import { adminOnly, type HttpServer } from '@reach/service-kit';
import { LANES } from './lanes.js';
import type { ReplayBuffer } from './replay-buffer.js';

export interface FlowApiDeps {
  buffer: ReplayBuffer;
  agents: TableView<AgentRecord>;
  adminToken: string | undefined;
  tokenSecret: TokenSecret;
}

/**
 * `GET /v1/agents/{agent_id}/deliveries` (admin): an agent's flow as the dispatcher sees it —
 * the max_concurrency it applies (null: the agent is unknown to this instance's registry view,
 * so not capped), how many deliveries are in flight (sent or about to be, un-acked) and how many
 * wait per priority lane. For operators asking why an agent gets nothing, and for tests.
 */
export function registerFlowApi(http: HttpServer, d: FlowApiDeps): void {
  http.route('GET', '/v1/agents/{agent_id}/deliveries', async (req) => {
    const denied = adminOnly(req.headers.authorization, d, "the dispatcher's flow API");
    if (denied) return denied;
    const agent = req.params.agent_id!;
    const state = await d.buffer.flowState(agent); // Redis away: 503 from the HTTP layer
    const waiting = Object.fromEntries(LANES.map((lane, i) => [lane, state.waiting[i]]));
    return {
      status: 200,
      body: { agent_id: agent, max_concurrency: d.agents.get(agent)?.metadata.max_concurrency ?? null, in_flight: state.inFlight, waiting },
    };
  });
}
