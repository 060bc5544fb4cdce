import { ReachError, sameSecret, verifyToken, VerifiedTokens, type TokenSecret } from '@reach/core';

/** Who is sending: an agent (from its token) or an operator holding the admin token. */
export interface Principal {
  readonly agentId: string;
  readonly admin: boolean;
  /** The agent's security domain from its token; undefined for the admin token. */
  readonly domain?: string;
}

/** The producer name a message submitted with the admin token carries (docs/design.md §3). */
export const ADMIN_PRODUCER = 'admin';

export interface RevocationCheck {
  has(jti: string): boolean;
}

/**
 * Verifies bearer / reach-token credentials the same way on both ingress paths (R-C2):
 * the token's HMAC signature and expiry (no call to the registry), then the revocation list.
 */
export class Authenticator {
  private readonly tokens: VerifiedTokens;

  constructor(
    private readonly secret: TokenSecret,
    private readonly adminToken: string | undefined,
    private readonly revocations: RevocationCheck,
  ) {
    this.tokens = new VerifiedTokens(secret);
  }

  /** The caller behind a token; throws AUTH_FAILED (1003) with the reason. */
  authenticate(token: string | undefined, now: number = Date.now()): Principal {
    if (token && this.adminToken && sameSecret(token, this.adminToken)) return { agentId: ADMIN_PRODUCER, admin: true };
    const claims = this.tokens.verify(token, now);
    if (this.revocations.has(claims.jti)) throw new ReachError('AUTH_FAILED', 'token has been revoked');
    return { agentId: claims.sub, admin: false, domain: claims.dom };
  }

  /**
   * The agent a token was really issued to, even when it is expired or revoked (its signature
   * still proves who holds it), or undefined for a missing or forged token. Used to decide
   * whom a refusal may be reported to: never to an identity nobody proved.
   */
  identify(token: string | undefined): string | undefined {
    if (!token) return undefined;
    if (this.adminToken && sameSecret(token, this.adminToken)) return ADMIN_PRODUCER;
    try {
      // Checked "at the epoch": the signature is verified and expiry cannot fail.
      return verifyToken(token, this.secret, 0).sub;
    } catch {
      return undefined;
    }
  }

  /** The envelope's producer must be the token's agent; the admin token may act for any producer. */
  static checkProducer(principal: Principal, producer: string): void {
    if (principal.admin || principal.agentId === producer) return;
    throw new ReachError('AUTH_FAILED', `producer ${producer} is not the token's agent ${principal.agentId}`, { details: { field: 'producer' } });
  }
}
