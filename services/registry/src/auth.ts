import { ReachError, bearer, sameSecret, verifyToken, type TokenClaims, type TokenSecret } from '@reach/core';
import type { Reply } from '@reach/service-kit';

/**
 * Who is calling the registry (docs/design.md §3 auth): the admin, an enrolling agent (the shared
 * enrollment token), an agent with its own token, or nobody.
 */
export type Caller = { kind: 'admin' } | { kind: 'enrollment' } | { kind: 'agent'; claims: TokenClaims } | { kind: 'anonymous' };

export interface AuthSecrets {
  tokenSecret: TokenSecret;
  adminToken: string | undefined;
  enrollmentToken: string | undefined;
}

/** Is this token id revoked (the registry's view of PostgreSQL revoked_tokens)? */
export type RevocationCheck = (jti: string) => boolean;

/**
 * Identifies the bearer token. A token that is given but is none of the known kinds is 1003,
 * never anonymous; so is a revoked agent token, which therefore can neither heartbeat nor
 * re-register its agent (a revoked agent is out until the admin lets it back in).
 */
export function identifyCaller(
  authorization: string | string[] | undefined,
  secrets: AuthSecrets,
  nowMs: number = Date.now(),
  isRevoked: RevocationCheck = () => false,
): Caller {
  const token = bearer(authorization);
  if (!token) return { kind: 'anonymous' };
  if (sameSecret(token, secrets.adminToken)) return { kind: 'admin' };
  if (sameSecret(token, secrets.enrollmentToken)) return { kind: 'enrollment' };
  // verifyToken throws AUTH_FAILED with the reason (malformed, bad signature, expired).
  const claims = verifyToken(token, secrets.tokenSecret, nowMs);
  if (isRevoked(claims.jti)) throw new ReachError('AUTH_FAILED', 'token has been revoked');
  return { kind: 'agent', claims };
}

/**
 * Admin endpoints (grants, token revocation): the admin token only. Nobody (no token, or one
 * that is not valid) → 401; a caller the registry knows but who is not the admin (an agent,
 * the enrollment token) → 403 with code 1003 (docs/design.md §3 error body). Undefined: go ahead.
 */
export function adminOnly(authorization: string | string[] | undefined, secrets: AuthSecrets, isRevoked: RevocationCheck, what: string): Reply | undefined {
  let caller: Caller;
  try {
    caller = identifyCaller(authorization, secrets, Date.now(), isRevoked);
  } catch (err) {
    const reason = err instanceof ReachError ? err.message : 'invalid token';
    return authReply(401, `${what} needs the admin token (${reason})`);
  }
  switch (caller.kind) {
    case 'admin':
      return undefined;
    case 'anonymous':
      return authReply(401, `${what} needs the admin token (Authorization: Bearer …)`);
    case 'enrollment':
      return authReply(403, `the enrollment token may not use ${what}: it needs the admin token`);
    case 'agent':
      return authReply(403, `agent ${caller.claims.sub} may not use ${what}: it needs the admin token`);
  }
}

function authReply(status: 401 | 403, message: string): Reply {
  return { status, body: new ReachError('AUTH_FAILED', message).toBody() };
}

export interface RegistrationGrant {
  /** The caller may only create the id, not replace an existing registration. */
  mustNotExist: boolean;
}

/**
 * May this caller register `agentId`? The admin always; an agent with its own valid token may
 * re-register itself; anyone else (the enrollment token when one is configured, otherwise
 * everyone) may only register an id that is not taken — so no one can hijack a live id.
 */
export function authorizeRegistration(caller: Caller, agentId: string, enrollmentRequired: boolean): RegistrationGrant {
  switch (caller.kind) {
    case 'admin':
      return { mustNotExist: false };
    case 'agent':
      if (caller.claims.sub !== agentId) throw new ReachError('AUTH_FAILED', `the token belongs to agent ${caller.claims.sub}, not ${agentId}`);
      return { mustNotExist: false };
    case 'enrollment':
      return { mustNotExist: true };
    case 'anonymous':
      if (enrollmentRequired) throw new ReachError('AUTH_FAILED', 'registration needs the enrollment token (Authorization: Bearer …)');
      return { mustNotExist: true };
  }
}

/** Heartbeat and deregistration: the agent itself (its own token) or the admin. */
export function authorizeAgent(caller: Caller, agentId: string): void {
  if (caller.kind === 'admin') return;
  if (caller.kind === 'agent') {
    if (caller.claims.sub === agentId) return;
    throw new ReachError('AUTH_FAILED', `the token belongs to agent ${caller.claims.sub}, not ${agentId}`);
  }
  throw new ReachError('AUTH_FAILED', `agent ${agentId}'s own token (or the admin token) is required`);
}
