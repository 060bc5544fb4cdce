import type { ServiceMetrics } from '@reach/service-kit';

type Counter = ReturnType<ServiceMetrics['counter']>;
type Histogram = ReturnType<ServiceMetrics['histogram']>;
type Gauge = ReturnType<ServiceMetrics['gauge']>;

/** reach_router_* metrics (docs/design.md §8): bounded labels only, never an agent or message id. */
export interface RouterMetrics {
  readonly decisions: Counter;
  readonly candidates: Histogram;
  readonly routeSeconds: Histogram;
  readonly hopSeconds: Histogram;
  /** Agents whose circuit is not closed, by state (OPEN, HALF_OPEN), in this router's map. */
  readonly circuitOpenAgents: Gauge;
  /** Circuit transitions this router observed, by the state moved to. */
  readonly circuitTransitions: Counter;
  /** Rules-file reloads by result (applied, invalid, unreadable). */
  readonly rulesReloads: Counter;
  readonly rulesLoaded: Gauge;
  /** Decisions made under a ReachRule (the rest used the default policy). */
  readonly ruleMatches: Counter;
}

export function routerMetrics(m: ServiceMetrics): RouterMetrics {
  return {
    decisions: m.counter('decisions_total', 'Routing decisions by outcome (routed, fanout, no_route, saturated, expired).', ['outcome']),
    candidates: m.histogram('candidates_per_decision', 'Candidates per routing decision (after the filter).', [], [0, 1, 2, 3, 5, 10, 20, 50, 100, 500]),
    routeSeconds: m.histogram(
      'route_duration_seconds',
      'Time to decide one route (filter, score, stickiness) and build its records.',
      [],
      [0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.1],
    ),
    circuitOpenAgents: m.gauge('circuit_open_agents', 'Target agents whose circuit is OPEN or HALF_OPEN (incl. auto-ejected), by state.', ['state']),
    circuitTransitions: m.counter('circuit_transitions_total', 'Circuit transitions seen by this router, by the state moved to (OPEN, HALF_OPEN, CLOSED).', [
      'state',
    ]),
    rulesReloads: m.counter('rules_reloads_total', 'Rules-file reloads by result: applied, invalid (last good rules kept), unreadable.', ['result']),
    rulesLoaded: m.gauge('rules_loaded', 'ReachRules in force in this router.'),
    ruleMatches: m.counter('rule_matches_total', 'Routing decisions made under a matching ReachRule.'),
    hopSeconds: m.histogram(
      'hop_duration_seconds',
      'Router hop: from the pending record being written to its decision being made.',
      [],
      [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    ),
  };
}
