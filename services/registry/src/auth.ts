import { ReachError, bearer, sameSecret, verifyToken, type TokenClaims } from '@reach/core';

/**
 * Who is calling the registry (DESIGN §3 auth): the admin, an enrolling agent (the shared
 * enrollment token), an agent with its own token, or nobody.
 */
export type Caller = { kind: 'admin' } | { kind: 'enrollment' } | { kind: 'agent'; claims: TokenClaims } | { kind: 'anonymous' };

export interface AuthSecrets {
  tokenSecret: string;
  adminToken: string | undefined;
  enrollmentToken: string | undefined;
}

/** Identifies the bearer token. A token that is given but is none of the known kinds is 1003, never anonymous. */
export function identifyCaller(authorization: string | string[] | undefined, secrets: AuthSecrets, nowMs: number = Date.now()): Caller {
  const token = bearer(authorization);
  if (!token) return { kind: 'anonymous' };
  if (sameSecret(token, secrets.adminToken)) return { kind: 'admin' };
  if (sameSecret(token, secrets.enrollmentToken)) return { kind: 'enrollment' };
  // verifyToken throws AUTH_FAILED with the reason (malformed, bad signature, expired).
  return { kind: 'agent', claims: verifyToken(token, secrets.tokenSecret, nowMs) };
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
