import { createHmac, timingSafeEqual } from 'node:crypto';
import { ReachError } from './errors.js';

/**
 * Agent tokens: issued by the registry, verified by ingress and the dispatcher without calling
 * it (SPEC R-C2). Format `rt1.<claims>.<signature>`: base64url JSON claims, HMAC-SHA256 over
 * `rt1.<claims>` with the shared REACH_TOKEN_SECRET. Expiry is in the claims; revocation
 * (by jti) is checked by the verifying service against its revocation view.
 */
export interface TokenClaims {
  /** agent id */
  sub: string;
  /** token id, for revocation */
  jti: string;
  /** issued at, epoch seconds */
  iat: number;
  /** expires at, epoch seconds */
  exp: number;
  /** the agent's security domain */
  dom: string;
}

const PREFIX = 'rt1';

function sign(body: string, secret: string): Buffer {
  return createHmac('sha256', secret).update(body).digest();
}

export function signToken(claims: TokenClaims, secret: string): string {
  const body = `${PREFIX}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
  return `${body}.${sign(body, secret).toString('base64url')}`;
}

function fail(message: string): never {
  throw new ReachError('AUTH_FAILED', message);
}

/** Verifies signature and expiry; throws AUTH_FAILED (1003) with the reason. */
export function verifyToken(token: string | undefined | null, secret: string, nowMs: number = Date.now()): TokenClaims {
  if (!token) fail('missing token');
  const parts = token.split('.');
  if (parts.length !== 3 || parts[0] !== PREFIX) fail('malformed token');
  const body = `${parts[0]}.${parts[1]}`;
  const given = Buffer.from(parts[2]!, 'base64url');
  const want = sign(body, secret);
  if (given.length !== want.length || !timingSafeEqual(given, want)) fail('token signature is invalid');
  let claims: TokenClaims;
  try {
    claims = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as TokenClaims;
  } catch {
    fail('malformed token claims');
  }
  if (typeof claims.sub !== 'string' || typeof claims.exp !== 'number' || typeof claims.jti !== 'string') fail('malformed token claims');
  if (claims.exp * 1000 <= nowMs) fail('token expired');
  return claims;
}

/** The token of an `Authorization: Bearer <token>` header, if any. */
export function bearer(header: string | string[] | undefined): string | undefined {
  const h = Array.isArray(header) ? header[0] : header;
  const m = h ? /^Bearer\s+(\S+)$/i.exec(h) : null;
  return m ? m[1] : undefined;
}

/** Constant-time comparison for the admin token. */
export function sameSecret(given: string | undefined, expected: string | undefined): boolean {
  if (!given || !expected) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Envelope header ingress sets to the verified token's domain (`dom`), overwriting whatever the
 * sender put there, so the router can check security domains (SPEC R-A8) without trusting a
 * header the sender could forge.
 */
export const PRODUCER_DOMAIN_HEADER = 'reach-producer-domain';

/**
 * Remembers tokens whose signature has been verified, so a producer sending thousands of
 * records a second with the same token costs one HMAC per token instead of one per record (the
 * HMAC was ~9 % of ingress's CPU under load). Expiry is still checked on every use, from the
 * cached claims; revocation is the caller's check, as with verifyToken. Only proven tokens are
 * kept, so a flood of forged tokens never fills it; it is emptied when full (bounded memory).
 */
export class VerifiedTokens {
  private readonly verified = new Map<string, TokenClaims>();

  constructor(
    private readonly secret: string,
    private readonly maxEntries = 10_000,
  ) {}

  /** verifyToken, with the signature check skipped for a token verified before. */
  verify(token: string | undefined | null, nowMs: number = Date.now()): TokenClaims {
    const known = token ? this.verified.get(token) : undefined;
    if (known) {
      if (known.exp * 1000 <= nowMs) fail('token expired');
      return known;
    }
    const claims = verifyToken(token, this.secret, nowMs);
    if (this.verified.size >= this.maxEntries) this.verified.clear();
    this.verified.set(token!, claims);
    return claims;
  }
}
