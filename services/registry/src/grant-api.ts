import { invalidRegistration } from '@reach/agents';
import { DOMAIN_PATTERN, type Logger } from '@reach/core';
import type { AuditLog, HttpServer, Reply, Request } from '@reach/service-kit';
import { adminOnly, type AuthSecrets, type RevocationCheck } from './auth.js';
import type { GrantFeed } from './grant-feed.js';
import type { GrantStore } from './grant-store.js';
import { grantToJson, parseGrantBody } from './grants.js';

export interface GrantApiDeps {
  store: GrantStore;
  feed: GrantFeed;
  log: Logger;
  secrets: AuthSecrets;
  isRevoked: RevocationCheck;
  /** How long a request waits for its change to reach reach.grants.v1 before answering 503. */
  publishTimeoutMs: number;
  /** Grant changes are admin actions of the audit trail. */
  audit: AuditLog;
}

function notFound(message: string): Reply {
  return { status: 404, body: { error: { code: 404, name: 'NOT_FOUND', message } } };
}

function domainQuery(req: Request, field: 'from_domain' | 'to_domain'): string | undefined {
  const v = req.query.get(field) ?? undefined;
  if (v !== undefined && !DOMAIN_PATTERN.test(v)) throw invalidRegistration(field, 'must be a domain: 1–64 letters, digits, ".", "_" or "-"');
  return v;
}

/**
 * Cross-domain grants (R-A8, docs/design.md §3), admin only: PUT /v1/grants (idempotent: 201
 * when created, 200 when it existed), GET /v1/grants (?from_domain=&to_domain=),
 * DELETE /v1/grants/{grant_id}. A change is in PostgreSQL and on reach.grants.v1 before the
 * answer; when the topic cannot be reached the answer is 503 and the change is published as
 * soon as it can be.
 */
export function mountGrantApi(http: HttpServer, deps: GrantApiDeps): void {
  const { store, feed, log } = deps;
  const admin =
    (what: string, handler: (req: Request) => Promise<Reply>) =>
    (req: Request): Promise<Reply> | Reply =>
      adminOnly(req.headers.authorization, deps.secrets, deps.isRevoked, what) ?? handler(req);

  async function put(req: Request): Promise<Reply> {
    const grant = parseGrantBody(await req.json());
    const { grant: stored, created } = await store.put(grant, 'admin');
    await feed.publish([stored.grant_id], deps.publishTimeoutMs);
    if (created) log.info({ grant_id: stored.grant_id }, 'grant created');
    return { status: created ? 201 : 200, body: grantToJson(stored) };
  }

  async function list(req: Request): Promise<Reply> {
    const filter = { from_domain: domainQuery(req, 'from_domain'), to_domain: domainQuery(req, 'to_domain') };
    const grants = await store.list(filter);
    return { status: 200, body: { grants: grants.map(grantToJson) } };
  }

  async function revoke(req: Request): Promise<Reply> {
    const id = req.params.grant_id!;
    if (!(await store.remove(id))) return notFound(`no grant ${id}`);
    await feed.publish([id], deps.publishTimeoutMs);
    log.info({ grant_id: id }, 'grant revoked');
    return { status: 200, body: { grant_id: id, status: 'REVOKED' } };
  }

  http
    .route('PUT', '/v1/grants', deps.audit.wrap('grant.put', null, admin('PUT /v1/grants', put)))
    .route('GET', '/v1/grants', admin('GET /v1/grants', list))
    .route('DELETE', '/v1/grants/{grant_id}', deps.audit.wrap('grant.revoke', 'grant_id', admin('DELETE /v1/grants', revoke)));
}
