/**
 * The documented answer of every HTTP route of every service to every kind of caller (issue
 * #13 §5; docs/access-control.md explains the classes). The auth matrix test walks the routes
 * each running service reports at GET /v1/routes and fails for a served route missing here, so
 * a new endpoint cannot go unchecked; and for a route listed here that nothing serves any more.
 */
export const CALLERS = ['none', 'malformed', 'expired', 'revoked', 'otherDomain', 'rightAgent', 'admin'] as const;
export type Caller = (typeof CALLERS)[number];
export type Expect = Readonly<Record<Caller, number>>;

/** What the requests of the walk address: created by the test before it starts. */
export interface Fixtures {
  /** The right agent: the producer of `messageId`, in its own domain. */
  agentId: string;
  domain: string;
  messageId: string;
  traceId: string;
  /** An agent the admin deletes (the right agent deletes itself, last of all). */
  victimId: string;
  /** An agent whose tokens the admin revokes. */
  revokeId: string;
  /** Ids nothing has: answers 404 to the admin. */
  unknownDlq: string;
  unknownJti: string;
  capability: string;
}

export interface RouteRequest {
  params?: Record<string, string>;
  body?: unknown;
}

export interface RouteSpec {
  readonly service: string;
  readonly method: string;
  readonly path: string;
  readonly expect: Expect;
  readonly request?: (f: Fixtures, caller: Caller) => RouteRequest;
}

const everyone = (status: number): Expect => ({
  none: status,
  malformed: status,
  expired: status,
  revoked: status,
  otherDomain: status,
  rightAgent: status,
  admin: status,
});

/** Health, readiness, metrics, the route list, the console's page: no credential involved. */
const PUBLIC = everyone(200);

/** A token that does not authenticate now (none, malformed, expired, revoked) is 401 everywhere but the service-kit admin gate. */
const unauthenticated = { none: 401, malformed: 401, expired: 401, revoked: 401 } as const;

/**
 * Admin endpoints behind service-kit's adminOnly (ingress quotas, dead-letter, router,
 * dispatcher): 401 without a token or with one nobody issued; 403 for a genuine agent token,
 * expired or revoked included (its signature proves who holds it; these services keep no
 * revocation view of their own); the admin gets the endpoint's answer.
 */
const adminKit = (admin: number): Expect => ({ none: 401, malformed: 401, expired: 403, revoked: 403, otherDomain: 403, rightAgent: 403, admin });

/** Admin endpoints of the registry: it checks expiry and revocation first, so those are 401. */
const adminRegistry = (admin: number): Expect => ({ ...unauthenticated, otherDomain: 403, rightAgent: 403, admin });

/** A message, its timeline, its trace (read-access.ts): another domain's agent is told it does not exist. */
const READ_SCOPED: Expect = { ...unauthenticated, otherDomain: 404, rightAgent: 200, admin: 200 };

/** Agent listings: any valid token, each seeing what it may (agent-visibility.ts). */
const LISTING: Expect = { ...unauthenticated, otherDomain: 200, rightAgent: 200, admin: 200 };

/** The agent itself or the admin (heartbeat, deregistration); another agent's token is 401 1003. */
const SELF: Expect = { ...unauthenticated, otherDomain: 401, rightAgent: 200, admin: 200 };

/** A2A JSON-RPC: any token that authenticates gets a JSON-RPC answer (200); errors travel inside it. */
const A2A_RPC: Expect = { ...unauthenticated, otherDomain: 200, rightAgent: 200, admin: 200 };
const A2A_LIST = { jsonrpc: '2.0', id: 1, method: 'ListTasks', params: {} };
/** An A2A message to the fixtures' capability (nobody serves it: it ends at once), one per caller and route. */
const a2aMessage = (f: Fixtures, caller: Caller, what: string) => ({
  message: { messageId: `matrix-${what}-${caller}-${f.messageId}`, role: 'ROLE_USER', parts: [{ text: 'matrix' }] },
  metadata: { skill: f.capability },
  configuration: { returnImmediately: true },
});

const HEARTBEAT = { current_load: 0, queue_length: 0, avg_latency_ms: 1, health: 1 };

/** In walk order: a route that changes what later routes need comes after them. */
const SERVICE_ROUTES: RouteSpec[] = [
  // ── ingress ──
  ...['ingress', 'registry', 'dispatcher', 'tracker', 'dead-letter', 'router', 'retry-scheduler', 'console'].flatMap((service) =>
    ['/healthz', '/readyz', '/metrics', '/v1/routes'].map((path) => ({ service, method: 'GET', path, expect: PUBLIC })),
  ),
  {
    service: 'ingress',
    method: 'POST',
    path: '/v1/messages',
    expect: { ...unauthenticated, otherDomain: 202, rightAgent: 202, admin: 202 },
    request: (f) => ({ body: { capability: f.capability, payload: { matrix: true } } }),
  },
  { service: 'ingress', method: 'GET', path: '/v1/messages/{id}', expect: READ_SCOPED, request: (f) => ({ params: { id: f.messageId } }) },
  { service: 'ingress', method: 'GET', path: '/v1/messages/{id}/events', expect: READ_SCOPED, request: (f) => ({ params: { id: f.messageId } }) },
  { service: 'ingress', method: 'GET', path: '/v1/traces/{trace_id}', expect: READ_SCOPED, request: (f) => ({ params: { trace_id: f.traceId } }) },
  // The A2A bridge (docs/a2a.md): public cards; JSON-RPC needs a token that authenticates (errors ride in a 200).
  { service: 'ingress', method: 'GET', path: '/.well-known/agent-card.json', expect: PUBLIC },
  {
    service: 'ingress',
    method: 'GET',
    path: '/a2a/capabilities/{capability}/.well-known/agent-card.json',
    // no live agent offers the fixtures' capability: the same 404 for every caller
    expect: everyone(404),
    request: (f) => ({ params: { capability: f.capability } }),
  },
  { service: 'ingress', method: 'POST', path: '/a2a/v1', expect: A2A_RPC, request: () => ({ body: A2A_LIST }) },
  {
    service: 'ingress',
    method: 'POST',
    path: '/a2a/capabilities/{capability}',
    expect: A2A_RPC,
    request: (f) => ({ params: { capability: f.capability }, body: A2A_LIST }),
  },
  // The HTTP+JSON binding, whole-system and per capability: the same classes as its JSON-RPC
  // twin, except that a task is read-scoped (another domain's agent is told it does not exist)
  // and the fixture message, which ended REJECTED (nobody serves its capability), is not cancelable.
  ...['/a2a/rest', '/a2a/capabilities/{capability}/rest'].flatMap((base): RouteSpec[] => [
    {
      service: 'ingress',
      method: 'POST',
      path: `${base}/message:send`,
      expect: A2A_RPC,
      request: (f, caller) => ({ params: { capability: f.capability }, body: a2aMessage(f, caller, 'send') }),
    },
    {
      service: 'ingress',
      method: 'POST',
      path: `${base}/message:stream`,
      expect: A2A_RPC,
      request: (f, caller) => ({ params: { capability: f.capability }, body: a2aMessage(f, caller, 'stream') }),
    },
    { service: 'ingress', method: 'GET', path: `${base}/tasks`, expect: A2A_RPC, request: (f) => ({ params: { capability: f.capability } }) },
    {
      service: 'ingress',
      method: 'GET',
      path: `${base}/tasks/{id}`,
      expect: READ_SCOPED,
      request: (f) => ({ params: { capability: f.capability, id: f.messageId } }),
    },
    {
      service: 'ingress',
      method: 'POST',
      path: `${base}/tasks/{idAndVerb}`,
      expect: { ...unauthenticated, otherDomain: 404, rightAgent: 400, admin: 400 },
      request: (f) => ({ params: { capability: f.capability, idAndVerb: `${f.messageId}:cancel` } }),
    },
    // Push notifications and the extended card are not offered (docs/a2a.md): 400 FAILED_PRECONDITION
    // to every caller whose token authenticates, after the same credential check.
    ...(
      [
        ['POST', `${base}/tasks/{id}/pushNotificationConfigs`],
        ['GET', `${base}/tasks/{id}/pushNotificationConfigs`],
        ['GET', `${base}/tasks/{id}/pushNotificationConfigs/{configId}`],
        ['DELETE', `${base}/tasks/{id}/pushNotificationConfigs/{configId}`],
        ['GET', `${base}/extendedAgentCard`],
      ] as const
    ).map(
      ([method, path]): RouteSpec => ({
        service: 'ingress',
        method,
        path,
        expect: { ...unauthenticated, otherDomain: 400, rightAgent: 400, admin: 400 },
        request: (f) => ({ params: { capability: f.capability, id: f.messageId, configId: 'matrix' }, ...(method === 'POST' ? { body: {} } : {}) }),
      }),
    ),
  ]),
  { service: 'ingress', method: 'GET', path: '/v1/quotas', expect: adminKit(200) },
  { service: 'ingress', method: 'GET', path: '/v1/quotas/{agent_id}', expect: adminKit(200), request: (f) => ({ params: { agent_id: f.agentId } }) },
  {
    service: 'ingress',
    method: 'PUT',
    path: '/v1/quotas/{agent_id}',
    expect: adminKit(200),
    request: (f) => ({ params: { agent_id: f.agentId }, body: { rate_per_s: 1000, burst: 2000 } }),
  },
  { service: 'ingress', method: 'DELETE', path: '/v1/quotas/{agent_id}', expect: adminKit(200), request: (f) => ({ params: { agent_id: f.agentId } }) },
  // ── registry ──
  {
    service: 'registry',
    method: 'POST',
    path: '/v1/agents',
    // re-registering the right agent: only its own token or the admin's may replace a live id
    expect: { ...unauthenticated, otherDomain: 401, rightAgent: 201, admin: 201 },
    request: (f) => ({ body: { agent_id: f.agentId, agent_type: 'matrix', capabilities: [], metadata: { domain: f.domain } } }),
  },
  { service: 'registry', method: 'GET', path: '/v1/agents', expect: LISTING },
  { service: 'registry', method: 'GET', path: '/v1/agents/{id}', expect: READ_SCOPED, request: (f) => ({ params: { id: f.agentId } }) },
  { service: 'registry', method: 'POST', path: '/v1/agents/{id}/heartbeat', expect: SELF, request: (f) => ({ params: { id: f.agentId }, body: HEARTBEAT }) },
  { service: 'registry', method: 'GET', path: '/v1/grants', expect: adminRegistry(200) },
  {
    service: 'registry',
    method: 'PUT',
    path: '/v1/grants',
    expect: adminRegistry(201),
    request: (f) => ({ body: { from_domain: f.domain, to_domain: `${f.domain}-to` } }),
  },
  {
    service: 'registry',
    method: 'DELETE',
    path: '/v1/grants/{grant_id}',
    expect: adminRegistry(200),
    request: (f) => ({ params: { grant_id: `${f.domain}|${f.domain}-to|*` } }),
  },
  { service: 'registry', method: 'GET', path: '/v1/audit', expect: adminRegistry(200) },
  { service: 'registry', method: 'POST', path: '/v1/agents/{id}/tokens/revoke', expect: adminRegistry(200), request: (f) => ({ params: { id: f.revokeId } }) },
  { service: 'registry', method: 'DELETE', path: '/v1/tokens/{jti}', expect: adminRegistry(404), request: (f) => ({ params: { jti: f.unknownJti } }) },
  // ── dispatcher ──
  {
    service: 'dispatcher',
    method: 'GET',
    path: '/v1/agents/{agent_id}/deliveries',
    expect: adminKit(200),
    request: (f) => ({ params: { agent_id: f.agentId } }),
  },
  // ── dead-letter ──
  { service: 'dead-letter', method: 'GET', path: '/v1/dlq', expect: adminKit(200) },
  { service: 'dead-letter', method: 'GET', path: '/v1/dlq/{id}', expect: adminKit(404), request: (f) => ({ params: { id: f.unknownDlq } }) },
  { service: 'dead-letter', method: 'POST', path: '/v1/dlq/replay', expect: adminKit(200), request: (f) => ({ body: { ids: [f.unknownDlq], dry_run: true } }) },
  { service: 'dead-letter', method: 'POST', path: '/v1/dlq/{id}/replay', expect: adminKit(404), request: (f) => ({ params: { id: f.unknownDlq } }) },
  { service: 'dead-letter', method: 'DELETE', path: '/v1/dlq/{id}', expect: adminKit(404), request: (f) => ({ params: { id: f.unknownDlq } }) },
  // ── router ──
  { service: 'router', method: 'GET', path: '/v1/view', expect: adminKit(200) },
  { service: 'router', method: 'GET', path: '/v1/view/grants', expect: adminKit(200) },
  { service: 'router', method: 'GET', path: '/v1/view/agents/{id}', expect: adminKit(200), request: (f) => ({ params: { id: f.agentId } }) },
  { service: 'router', method: 'GET', path: '/v1/rules', expect: adminKit(200) },
  { service: 'router', method: 'POST', path: '/v1/rules/reload', expect: adminKit(200) },
  {
    service: 'router',
    method: 'POST',
    path: '/v1/rules/explain',
    expect: adminKit(200),
    request: (f) => ({ body: { capability: f.capability, payload: {} } }),
  },
  // ── console: its page and its own two API routes ──
  { service: 'console', method: 'GET', path: '/', expect: PUBLIC },
  { service: 'console', method: 'GET', path: '/{file}', expect: PUBLIC, request: () => ({ params: { file: 'style.css' } }) },
  { service: 'console', method: 'GET', path: '/js/{file}', expect: PUBLIC, request: () => ({ params: { file: 'main.js' } }) },
  { service: 'console', method: 'GET', path: '/js/{dir}/{file}', expect: PUBLIC, request: () => ({ params: { dir: 'views', file: 'audit.js' } }) },
  { service: 'console', method: 'GET', path: '/api/overview', expect: PUBLIC },
  { service: 'console', method: 'GET', path: '/api/qos-history', expect: LISTING },
  // ── last: the right agent deletes itself, the admin another agent ──
  {
    service: 'registry',
    method: 'DELETE',
    path: '/v1/agents/{id}',
    expect: SELF,
    request: (f, caller) => ({ params: { id: caller === 'admin' ? f.victimId : f.agentId } }),
  },
];

/**
 * The console forwards exactly its allow-list (services/console/src/proxy.ts) with the caller's
 * own Authorization: each proxied route answers as the route it forwards to.
 */
export function routeTable(proxy: ReadonlyArray<{ method: string; upstream: string; path: string }>): RouteSpec[] {
  const proxied = proxy.map((p): RouteSpec => {
    const upstream = SERVICE_ROUTES.find((r) => r.service === p.upstream && r.method === p.method && r.path === p.path);
    if (!upstream) throw new Error(`the console forwards ${p.method} ${p.upstream} ${p.path}, which no route of the table describes`);
    return { ...upstream, service: 'console', path: `/api/${p.upstream}${p.path}` };
  });
  // before the last (destructive) route
  return [...SERVICE_ROUTES.slice(0, -1), ...proxied, SERVICE_ROUTES[SERVICE_ROUTES.length - 1]!];
}
