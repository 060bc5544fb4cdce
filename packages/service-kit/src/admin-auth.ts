import { bearer, ReachError, sameSecret, verifyToken, type TokenSecret } from '@reach/core';
import type { Reply } from './http.js';

export interface AdminSecrets {
  adminToken: string | undefined;
  /** The token keys (REACH_TOKEN_SECRET[S]): tell an agent token (403) from a stranger's (401); without them every non-admin token is 401. */
  tokenSecret: TokenSecret | undefined;
}

function refused(status: 401 | 403, message: string): Reply {
  return { status, body: new ReachError('AUTH_FAILED', message).toBody() };
}

/**
 * The gate of every admin endpoint (docs/design.md §3): the admin token passes (undefined); no token,
 * or one nobody issued → 401; a genuine agent token (even an expired one: its signature still
 * proves who holds it) → 403, the caller is known but not allowed. Both carry the 1003
 * AUTH_FAILED body. `what` names the API in the message, e.g. "the quota API".
 */
export function adminOnly(authorization: string | string[] | undefined, secrets: AdminSecrets, what: string): Reply | undefined {
  const token = bearer(authorization);
  if (!token) return refused(401, `missing bearer token: ${what} needs the admin token`);
  if (secrets.adminToken && sameSecret(token, secrets.adminToken)) return undefined;
  if (secrets.tokenSecret) {
    try {
      const claims = verifyToken(token, secrets.tokenSecret, 0);
      return refused(403, `agent ${claims.sub} may not use ${what}: it needs the admin token`);
    } catch {
      // neither the admin token nor a token we issued
    }
  }
  return refused(401, `invalid token: ${what} needs the admin token`);
}
