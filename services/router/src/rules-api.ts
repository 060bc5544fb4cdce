import { envelopeFromJson } from '@reach/envelope';
import type { CircuitCache } from '@reach/circuits';
import { policyOf, readHints, routeMessage, ruleFactsOf, withRuleAction, type RouteDeps } from '@reach/routing';
import { adminOnly, type AdminSecrets, type AuditLog, type HttpServer, type Reply, type Request } from '@reach/service-kit';
import type { RulesWatcher } from './rules-watcher.js';
import type { RegistryViews } from '@reach/service-kit';

interface RulesApiDeps {
  rules: RulesWatcher;
  views: RegistryViews;
  deps: RouteDeps;
  circuits: CircuitCache;
  secrets: AdminSecrets;
  /** A reload asked for is an admin action of the audit trail. */
  audit: AuditLog;
}

/**
 * Admin, read-only: the rules in force (GET /v1/rules) and a dry run of the routing decision
 * for a message (POST /v1/rules/explain, behind `reach rules explain`): which rule matched, the
 * candidates with their scores, and the choice — against this router's live view of the
 * registry, circuits and grants. A dry run writes nothing: no sticky binding, no probe claim,
 * no record.
 */
export function registerRulesApi(http: HttpServer, d: RulesApiDeps): void {
  const admin =
    (handler: (req: Request) => Promise<Reply> | Reply) =>
    (req: Request): Promise<Reply> | Reply =>
      adminOnly(req.headers.authorization, d.secrets, 'the rules API') ?? handler(req);

  http.route(
    'GET',
    '/v1/rules',
    admin(() => {
      const set = d.rules.current;
      return {
        status: 200,
        body: {
          ...d.rules.status(),
          rules: set.rules.map((r) => ({ name: r.name, at: r.at, when: r.when, action: r.action, fallback: r.fallback })),
        },
      };
    }),
  );

  // Re-reads REACH_RULES_FILE now (it is also re-read every second): an invalid file keeps the
  // rules in force and shows up in `rejected`, as with the timer's reloads.
  http.route(
    'POST',
    '/v1/rules/reload',
    d.audit.wrap(
      'rules.reload',
      null,
      admin(async () => ({ status: 200, body: await d.rules.reloadNow() })),
    ),
  );

  http.route(
    'POST',
    '/v1/rules/explain',
    admin(async (req) => {
      const body = await req.json();
      const producer =
        typeof body === 'object' && body !== null && typeof (body as { producer?: unknown }).producer === 'string'
          ? (body as { producer: string }).producer
          : 'explain';
      const received = envelopeFromJson(body, { producer });
      const now = Date.now();
      const facts = ruleFactsOf(received, d.views.index.agent(received.producer));
      const rule = d.rules.current.match(facts);
      const envelope = withRuleAction(received, rule);
      const deps: RouteDeps = {
        ...d.deps,
        bindSticky: false,
        hooks: { ...d.deps.hooks, circuitOpen: (agentId) => d.circuits.verdict(agentId, now) !== 'closed' },
      };
      const decision = await routeMessage(envelope, readHints({}, envelope), deps, now, policyOf(rule));
      return {
        status: 200,
        body: {
          rules_digest: d.rules.current.digest,
          facts,
          rule: rule ? { name: rule.name, at: rule.at, action: rule.action, fallback: rule.fallback } : null,
          routed_as: { priority: envelope.priority, timeout_ms: envelope.timeout_ms },
          decision,
        },
      };
    }),
  );
}
