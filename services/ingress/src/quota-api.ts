import { ReachError, ACTOR_HEADER } from '@reach/core';
import { adminOnly, type AdminSecrets, type AuditLog, type HttpServer, type Reply, type Request } from '@reach/service-kit';
import { checkAgentId, parseQuotaBody, quotaJson } from './quota-limits.js';
import type { QuotaOverrides } from './quota-overrides.js';

export interface QuotaApiDeps {
  http: HttpServer;
  secrets: AdminSecrets;
  overrides: QuotaOverrides;
  instance: string;
  /** Quota changes are admin actions of the audit trail. */
  audit: AuditLog;
}

const DEFAULT_LIST_LIMIT = 100;
const MAX_LIST_LIMIT = 1000;
/** The optional `reach-actor` header names who made a change, for the audit column `updated_by`. */
const ACTOR = /^[A-Za-z0-9_.:@/ -]{1,100}$/;

function actor(req: Request): string {
  const v = req.headers[ACTOR_HEADER];
  const raw = Array.isArray(v) ? v[0] : v;
  return raw !== undefined && ACTOR.test(raw) ? `admin (${raw})` : 'admin';
}

function listLimit(raw: string | null): number {
  if (raw === null || raw === '') return DEFAULT_LIST_LIMIT;
  const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > MAX_LIST_LIMIT) {
    throw new ReachError('INVALID_ENVELOPE', `limit: must be an integer in [1, ${MAX_LIST_LIMIT}]`, { details: { field: 'limit' } });
  }
  return n;
}

/**
 * The quota admin API on ingress (docs/design.md §3, R-D7): `PUT /v1/quotas/{agent_id}`
 * `{rate_per_s, burst}` sets an override (stored in PostgreSQL, applied by every instance within
 * REACH_QUOTA_REFRESH_MS), `GET /v1/quotas/{agent_id}` shows what applies to an agent (and what
 * this instance applies right now), `GET /v1/quotas` lists the overrides (paged by agent id), and
 * `DELETE /v1/quotas/{agent_id}` returns the agent to the default.
 */
export function registerQuotaApi(d: QuotaApiDeps): void {
  const guard =
    (handler: (req: Request) => Promise<Reply>) =>
    async (req: Request): Promise<Reply> =>
      adminOnly(req.headers.authorization, d.secrets, 'the quota API') ?? handler(req);
  const defaults = d.overrides.defaults;

  d.http.route(
    'GET',
    '/v1/quotas',
    guard(async (req) => {
      const limit = listLimit(req.query.get('limit'));
      const after = req.query.get('after') || undefined;
      const rows = await d.overrides.list(limit + 1, after);
      const page = rows.slice(0, limit);
      return {
        status: 200,
        body: {
          default: { rate_per_s: defaults.ratePerS, burst: defaults.burst },
          quotas: page.map((r) => ({ ...quotaJson(r.agentId, r.limit, 'override', r.updatedAt), updated_by: r.updatedBy })),
          next_after: rows.length > limit ? (page[page.length - 1]?.agentId ?? null) : null,
        },
      };
    }),
  );

  d.http.route(
    'GET',
    '/v1/quotas/{agent_id}',
    guard(async (req) => {
      const agentId = checkAgentId(req.params.agent_id!);
      const row = await d.overrides.get(agentId);
      const applied = d.overrides.limitFor(agentId);
      const body = row
        ? { ...quotaJson(agentId, row.limit, 'override', row.updatedAt), updated_by: row.updatedBy }
        : quotaJson(agentId, defaults, 'default', null);
      // What this instance enforces now: equal to the stored quota once its refresh has run.
      return { status: 200, body: { ...body, applied: { instance: d.instance, rate_per_s: applied.ratePerS, burst: applied.burst } } };
    }),
  );

  d.http.route(
    'PUT',
    '/v1/quotas/{agent_id}',
    d.audit.wrap(
      'quota.set',
      'agent_id',
      guard(async (req) => {
        const agentId = checkAgentId(req.params.agent_id!);
        const limit = parseQuotaBody(await req.json(), defaults);
        const row = await d.overrides.set(agentId, limit, actor(req));
        return { status: 200, body: { ...quotaJson(agentId, row.limit, 'override', row.updatedAt), updated_by: row.updatedBy } };
      }),
    ),
  );

  d.http.route(
    'DELETE',
    '/v1/quotas/{agent_id}',
    d.audit.wrap(
      'quota.reset',
      'agent_id',
      guard(async (req) => {
        const agentId = checkAgentId(req.params.agent_id!);
        const removed = await d.overrides.remove(agentId, actor(req));
        return { status: 200, body: { ...quotaJson(agentId, defaults, 'default', null), removed } };
      }),
    ),
  );
}
