import { PRODUCER_DOMAIN_HEADER, ERROR, type CodeOf } from '@reach/core';
import type { CapabilityMode, Envelope } from '@reach/envelope';
import type { AgentIndex } from './agent-index.js';
import { filterCandidates, type FilterHooks } from './candidates.js';
import { parseAddress } from './capability.js';

/**
 * What one producer can reach right now (R-G6, pre-flight from a local view): for every
 * capability and topic name the registry knows, 0 when a message to it would be routed (or held
 * for an agent that is only reconnecting), else the code the router would refuse it with —
 * 3001 CIRCUIT_OPEN when every agent that passes liveness and reachability has an open circuit,
 * 2003 DOMAIN_DENIED when every such agent is in a domain no grant opens to the producer, 2001
 * NO_ROUTE otherwise (noRouteError's order). A name missing from the map is 2001 too. It is the
 * router's own candidate filter (filterCandidates), so the view and the routing agree up to
 * the lag of their feeds.
 */
export type RouteVerdict = 0 | CodeOf<'NO_ROUTE' | 'DOMAIN_DENIED' | 'CIRCUIT_OPEN'>;

export interface RoutesView {
  /** By capability name (mode handle: request, send to a capability). */
  capabilities: Record<string, RouteVerdict>;
  /** By topic (mode subscribe: publish). */
  topics: Record<string, RouteVerdict>;
}

export interface RouteViewInput {
  readonly index: AgentIndex;
  /** The producer the view is for: its agent id and security domain. */
  readonly producer: string;
  readonly domain: string;
  readonly now: number;
  readonly reconnectGraceMs: number;
  readonly hooks: FilterHooks;
}

function verdict(input: RouteViewInput, name: string, mode: CapabilityMode): RouteVerdict | undefined {
  const envelope = {
    message_id: '',
    message_type: mode === 'handle' ? 'task_request' : 'event',
    capability: mode === 'handle' ? name : null,
    topic: mode === 'subscribe' ? name : null,
    target_agent_id: null,
    producer: input.producer,
    headers: { [PRODUCER_DOMAIN_HEADER]: input.domain },
  } as unknown as Envelope;
  const f = filterCandidates(input.index, {
    address: parseAddress(name),
    mode,
    requiredTags: [],
    exclude: [],
    envelope,
    now: input.now,
    reconnectGraceMs: input.reconnectGraceMs,
    hooks: input.hooks,
  });
  if (f.candidates.length > 0 || f.reconnectingUntil !== null) return 0;
  // Nobody offers the name in this mode at all: not listed (2001 by absence).
  if ((f.rejected.mode ?? 0) === f.considered) return undefined;
  if ((f.rejected.circuit ?? 0) > 0) return ERROR.CIRCUIT_OPEN;
  if ((f.rejected.domain ?? 0) > 0) return ERROR.DOMAIN_DENIED;
  return ERROR.NO_ROUTE;
}

export function routesView(input: RouteViewInput): RoutesView {
  const view: RoutesView = { capabilities: {}, topics: {} };
  for (const name of input.index.names()) {
    const handle = verdict(input, name, 'handle');
    if (handle !== undefined) view.capabilities[name] = handle;
    const subscribe = verdict(input, name, 'subscribe');
    if (subscribe !== undefined) view.topics[name] = subscribe;
  }
  return view;
}

/** What changed from `before` to `after`: changed or new entries, and removed ones as null. */
export function routesDelta(
  before: RoutesView,
  after: RoutesView,
): { capabilities: Record<string, RouteVerdict | null>; topics: Record<string, RouteVerdict | null> } | null {
  const diff = (a: Record<string, RouteVerdict>, b: Record<string, RouteVerdict>): Record<string, RouteVerdict | null> => {
    const out: Record<string, RouteVerdict | null> = {};
    for (const [k, v] of Object.entries(b)) if (a[k] !== v) out[k] = v;
    for (const k of Object.keys(a)) if (!(k in b)) out[k] = null;
    return out;
  };
  const capabilities = diff(before.capabilities, after.capabilities);
  const topics = diff(before.topics, after.topics);
  return Object.keys(capabilities).length + Object.keys(topics).length === 0 ? null : { capabilities, topics };
}
