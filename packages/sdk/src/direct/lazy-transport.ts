import type { AgentTransport } from '../transport.js';
import type { LocalReach } from './local-reach.js';

/**
 * Direct mode's transport, loaded on first use: a queued-mode node never loads the local control
 * plane and what it routes with (@reach/envelope's codecs, @reach/rules, @reach/routing), so the
 * SDK imports as fast as it did before direct mode existed.
 */
export function lazyDirectTransport(reach?: LocalReach): AgentTransport {
  let loaded: Promise<AgentTransport> | undefined;
  const transport = (): Promise<AgentTransport> => (loaded ??= import('./direct-transport.js').then((m) => m.directTransport(reach)));
  return {
    registry: {
      register: async (descriptor, token) => (await transport()).registry.register(descriptor, token),
      heartbeat: async (agentId, token, load) => (await transport()).registry.heartbeat(agentId, token, load),
      deregister: async (agentId, token) => (await transport()).registry.deregister(agentId, token),
      list: async (query, token) => (await transport()).registry.list(query, token),
    },
    open: async (options) => (await transport()).open(options),
  };
}
