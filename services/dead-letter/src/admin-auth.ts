import { bearer, sameSecret, verifyToken } from '@reach/core';
import type { Reply, Request } from '@reach/service-kit';

function authError(status: 401 | 403, message: string): Reply {
  return { status, body: { error: { code: 1003, name: 'AUTH_FAILED', message } } };
}

/**
 * The dead-letter API is for admins only (DESIGN §3): no or an unknown token → 401; a valid
 * agent token (verified with REACH_TOKEN_SECRET) → 403, the caller is known but not allowed.
 * Returns undefined when the admin token was given.
 */
export function adminOnly(req: Pick<Request, 'headers'>, secrets: { adminToken: string | undefined; tokenSecret: string | undefined }): Reply | undefined {
  const token = bearer(req.headers.authorization);
  if (!token) return authError(401, 'missing bearer token: the dead-letter API needs the admin token');
  if (secrets.adminToken && sameSecret(token, secrets.adminToken)) return undefined;
  if (secrets.tokenSecret) {
    try {
      const claims = verifyToken(token, secrets.tokenSecret);
      return authError(403, `agent ${claims.sub} may not use the dead-letter API: it needs the admin token`);
    } catch {
      // neither the admin token nor a valid agent token
    }
  }
  return authError(401, 'invalid token: the dead-letter API needs the admin token');
}
