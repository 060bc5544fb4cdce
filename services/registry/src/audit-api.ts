import { parseTimeParam, ReachError, NAME_FILTER_PATTERN } from '@reach/core';
import type { HttpServer, Reply, Request } from '@reach/service-kit';
import type { Pool } from '@reach/store';
import { adminOnly, type AuthSecrets, type RevocationCheck } from './auth.js';

/**
 * `GET /v1/audit` (admin only; issue #13): the audit trail of admin actions, newest first, from
 * `audit_log` (migration 009), which every service serving an admin action appends to. On the
 * registry because it is the identity and permission service (tokens, grants). Filters:
 * `action`, `actor`, `result` (ok | denied | failed), `since` / `until` (RFC 3339 or epoch ms),
 * `limit` (1–1000, default 100).
 */
export interface AuditApiDeps {
  pg: Pool;
  secrets: AuthSecrets;
  isRevoked: RevocationCheck;
}

interface Row {
  audit_id: string;
  at: Date;
  actor: string;
  source: string | null;
  service: string;
  instance: string;
  action: string;
  target: string | null;
  request: unknown;
  status: number;
  result: string;
  detail: unknown;
}

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;
const RESULTS = new Set(['ok', 'denied', 'failed']);

function invalid(field: string, message: string): never {
  throw new ReachError('INVALID_ENVELOPE', `${field}: ${message}`, { details: { field } });
}

/** The WHERE clause and parameters of a query string; exported for its unit test. */
export function auditQuery(q: URLSearchParams): { where: string; params: unknown[]; limit: number } {
  const known = new Set(['action', 'actor', 'result', 'since', 'until', 'limit']);
  for (const k of q.keys()) if (!known.has(k)) invalid(k, `unknown filter (${[...known].join(', ')})`);
  const clauses: string[] = [];
  const params: unknown[] = [];
  for (const field of ['action', 'actor'] as const) {
    const v = q.get(field);
    if (v === null || v === '') continue;
    if (!NAME_FILTER_PATTERN.test(v)) invalid(field, 'must be a name of letters, digits and _.:@/-');
    params.push(v);
    clauses.push(`${field} = $${params.length}`);
  }
  const result = q.get('result');
  if (result !== null && result !== '') {
    if (!RESULTS.has(result)) invalid('result', 'must be ok, denied or failed');
    params.push(result);
    clauses.push(`result = $${params.length}`);
  }
  const since = parseTimeParam(q.get('since'), 'since');
  if (since !== undefined) {
    params.push(new Date(since));
    clauses.push(`at >= $${params.length}`);
  }
  const until = parseTimeParam(q.get('until'), 'until');
  if (until !== undefined) {
    params.push(new Date(until));
    clauses.push(`at < $${params.length}`);
  }
  const rawLimit = q.get('limit');
  const limit = rawLimit === null || rawLimit === '' ? DEFAULT_LIMIT : Number(rawLimit);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) invalid('limit', `must be an integer from 1 to ${MAX_LIMIT}`);
  return { where: clauses.length ? `WHERE ${clauses.join(' AND ')}` : '', params, limit };
}

function entryJson(r: Row): Record<string, unknown> {
  return {
    audit_id: r.audit_id,
    at: r.at.toISOString(),
    actor: r.actor,
    source: r.source,
    service: r.service,
    instance: r.instance,
    action: r.action,
    target: r.target,
    request: r.request,
    status: r.status,
    result: r.result,
    detail: r.detail,
  };
}

export function mountAuditApi(http: HttpServer, deps: AuditApiDeps): void {
  http.route('GET', '/v1/audit', async (req: Request): Promise<Reply> => {
    const refused = adminOnly(req.headers.authorization, deps.secrets, deps.isRevoked, 'the audit trail');
    if (refused) return refused;
    const { where, params, limit } = auditQuery(req.query);
    let rows: Row[];
    try {
      rows = (
        await deps.pg.query<Row>(
          `SELECT audit_id, at, actor, source, service, instance, action, target, request, status, result, detail
             FROM audit_log ${where} ORDER BY at DESC, audit_id DESC LIMIT ${limit}`,
          params,
        )
      ).rows;
    } catch (err) {
      throw new ReachError('DEPENDENCY_UNAVAILABLE', `audit trail unavailable: ${(err as Error).message}`, { cause: err });
    }
    return { status: 200, body: { entries: rows.map(entryJson) } };
  });
}
