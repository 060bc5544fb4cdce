import { ReachError } from '@reach/core';

/**
 * Another connection of the same agent took over (close code 4001): a second process runs as
 * this agent id, and the newer connection wins. The node stopped without deregistering (the
 * agent is the other process's now) and does not reconnect: reconnecting would take the agent
 * back from it, which would do the same, and the two would take turns forever. `run()`
 * rejects with it; the same error as the Python SDK's.
 */
export class AgentReplacedError extends ReachError {
  constructor(readonly agentId: string) {
    super('CONNECTION_CLOSED', `agent ${agentId} was taken over by a newer connection (close 4001); this node stopped without deregistering`, {
      retryable: false,
      details: { agent_id: agentId },
    });
    this.name = 'AgentReplacedError';
  }
}
