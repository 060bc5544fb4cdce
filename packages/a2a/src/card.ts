import type { AgentRecord } from '@reach/envelope';
import { A2A_PROTOCOL_VERSION, type AgentCard, type AgentSkill } from './wire.js';

/**
 * Agent Cards from the live registry view (docs/a2a.md): one for Agent-Reach as a whole, whose
 * skills are the capabilities live agents offer (id = capability name), and one per capability
 * whose JSON-RPC endpoint sends to that capability without naming it.
 */

/** The well-known path of an Agent Card (spec §8.2), relative to the agent's base URL. */
export const AGENT_CARD_PATH = '.well-known/agent-card.json';
/** The JSON-RPC endpoint of the whole system, and the prefix of the per-capability ones. */
export const A2A_RPC_PATH = '/a2a/v1';
export const A2A_CAPABILITY_PREFIX = '/a2a/capabilities/';
/** The HTTP+JSON binding's base: of the whole system, and under a capability's prefix. */
export const A2A_REST_PATH = '/a2a/rest';
export const A2A_REST_SUFFIX = '/rest';
/** The security scheme name the cards declare: the agent tokens, as bearer tokens. */
export const BEARER_SCHEME = 'reachToken';

const MODES = ['application/json', 'text/plain'];

/** Description and examples a capability may carry in its descriptor's `scope` (docs/a2a.md). */
function described(scopeJson: string | null): { description?: string; examples?: string[] } {
  if (scopeJson === null) return {};
  try {
    const scope = JSON.parse(scopeJson) as { description?: unknown; examples?: unknown };
    const out: { description?: string; examples?: string[] } = {};
    if (typeof scope.description === 'string') out.description = scope.description;
    if (Array.isArray(scope.examples)) out.examples = scope.examples.filter((e): e is string => typeof e === 'string');
    return out;
  } catch {
    return {};
  }
}

/**
 * The skills of the live agents: one per capability name (handle mode; subscribe topics are
 * not tasks), tags merged across the agents offering it, description and examples from the
 * first agent that gives them.
 */
export function skillsOf(live: Iterable<AgentRecord>): AgentSkill[] {
  const byName = new Map<string, { tags: Set<string>; description?: string; examples?: string[]; agents: number }>();
  for (const agent of live) {
    for (const c of agent.capabilities) {
      if (c.mode !== 'handle') continue;
      let s = byName.get(c.name);
      if (!s) byName.set(c.name, (s = { tags: new Set(), agents: 0 }));
      s.agents++;
      for (const t of c.tags) s.tags.add(t);
      const d = described(c.scope_json);
      s.description ??= d.description;
      s.examples ??= d.examples;
    }
  }
  return [...byName.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, s]) => ({
      id: name,
      name,
      description: s.description ?? `Agent-Reach capability ${name} (${s.agents} live agent${s.agents === 1 ? '' : 's'})`,
      tags: [...s.tags].sort(),
      ...(s.examples && s.examples.length > 0 ? { examples: s.examples } : {}),
      inputModes: MODES,
      outputModes: MODES,
    }));
}

function card(name: string, description: string, rpcUrl: string, restUrl: string, skills: AgentSkill[], version: string): AgentCard {
  return {
    name,
    description,
    supportedInterfaces: [
      { url: rpcUrl, protocolBinding: 'JSONRPC', protocolVersion: A2A_PROTOCOL_VERSION },
      { url: restUrl, protocolBinding: 'HTTP+JSON', protocolVersion: A2A_PROTOCOL_VERSION },
    ],
    provider: { organization: 'Agent-Reach', url: 'https://github.com/agent-reach' },
    version,
    capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false },
    securitySchemes: {
      [BEARER_SCHEME]: {
        httpAuthSecurityScheme: {
          scheme: 'Bearer',
          bearerFormat: 'Agent-Reach agent token',
          description: 'The token POST /v1/agents returned to a registered agent.',
        },
      },
    },
    securityRequirements: [{ schemes: { [BEARER_SCHEME]: { list: [] } } }],
    defaultInputModes: MODES,
    defaultOutputModes: MODES,
    skills,
  };
}

/** The card of Agent-Reach as a whole at `<base>/.well-known/agent-card.json`. */
export function systemCard(baseUrl: string, live: Iterable<AgentRecord>, version: string): AgentCard {
  return card(
    'Agent-Reach',
    'The reach layer for multi-agent systems: every skill is a capability a live agent serves, delivered with retries, failover, a dead-letter queue and a queryable timeline.',
    `${baseUrl}${A2A_RPC_PATH}`,
    `${baseUrl}${A2A_REST_PATH}`,
    skillsOf(live),
    version,
  );
}

/** The card of one capability at `<base>/a2a/capabilities/<name>/.well-known/agent-card.json`; undefined when no live agent offers it. */
export function capabilityCard(baseUrl: string, capability: string, live: Iterable<AgentRecord>, version: string): AgentCard | undefined {
  const skill = skillsOf(live).find((s) => s.id === capability);
  if (!skill) return undefined;
  const own = `${baseUrl}${A2A_CAPABILITY_PREFIX}${encodeURIComponent(capability)}`;
  return card(`Agent-Reach: ${capability}`, skill.description, own, `${own}${A2A_REST_SUFFIX}`, [skill], version);
}
