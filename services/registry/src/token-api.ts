import type { Logger } from '@reach/core';
import type { AuditLog, HttpServer, Reply, Request, RevokedTokenView } from '@reach/service-kit';
import { adminOnly, type AuthSecrets } from './auth.js';
import type { RevokedRow, TokenStore } from './token-store.js';

export interface TokenApiDeps {
  tokens: TokenStore;
  revoked: RevokedTokenView;
  log: Logger;
  secrets: AuthSecrets;
  /** Revocations are admin actions of the audit trail. */
  audit: AuditLog;
}

/**
 * Revokes tokens and makes this instance refuse them at once; the other verifiers (ingress,
 * dispatcher, other registry instances) follow PostgreSQL within about a second.
 */
export async function revokeAgentTokens(deps: Pick<TokenApiDeps, 'tokens' | 'revoked'>, agentId: string): Promise<RevokedRow[]> {
  const rows = await deps.tokens.revokeAgent(agentId);
  for (const r of rows) deps.revoked.add(r.jti, r.expires_at);
  return rows;
}

/**
 * Token revocation (R-C2), admin only: POST /v1/agents/{id}/tokens/revoke revokes every
 * live token of an agent; DELETE /v1/tokens/{jti} revokes one. A revoked token is refused on
 * HTTP (401, 1003), by the dispatcher (close 4003, also for an open connection) and on the
 * Kafka ingress path (DLQ INVALID, 1003); the agent cannot re-register with it either.
 */
export function mountTokenApi(http: HttpServer, deps: TokenApiDeps): void {
  const { tokens, revoked, log } = deps;
  const isRevoked = (jti: string) => revoked.has(jti);
  const admin =
    (what: string, handler: (req: Request) => Promise<Reply>) =>
    (req: Request): Promise<Reply> | Reply =>
      adminOnly(req.headers.authorization, deps.secrets, isRevoked, what) ?? handler(req);

  async function revokeAgent(req: Request): Promise<Reply> {
    const id = req.params.id!;
    const rows = await revokeAgentTokens(deps, id);
    log.info({ agent_id: id, tokens: rows.length }, 'agent tokens revoked');
    return {
      status: 200,
      body: { agent_id: id, revoked: rows.map((r) => ({ jti: r.jti, expires_at: new Date(r.expires_at).toISOString() })) },
    };
  }

  async function revokeOne(req: Request): Promise<Reply> {
    const jti = req.params.jti!;
    const result = await tokens.revokeOne(jti);
    if (result.outcome === 'unknown') {
      return { status: 404, body: { error: { code: 404, name: 'NOT_FOUND', message: `no live token ${jti} was issued` } } };
    }
    revoked.add(result.token.jti, result.token.expires_at);
    if (result.outcome === 'revoked') log.info({ agent_id: result.token.agent_id, jti }, 'token revoked');
    return { status: 200, body: { jti, agent_id: result.token.agent_id, status: 'REVOKED', expires_at: new Date(result.token.expires_at).toISOString() } };
  }

  http
    .route('POST', '/v1/agents/{id}/tokens/revoke', deps.audit.wrap('token.revoke_agent', 'id', admin('POST /v1/agents/{id}/tokens/revoke', revokeAgent)))
    .route('DELETE', '/v1/tokens/{jti}', deps.audit.wrap('token.revoke', 'jti', admin('DELETE /v1/tokens/{jti}', revokeOne)));
}
