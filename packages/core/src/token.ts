import { createHmac, timingSafeEqual } from 'node:crypto';
import { ReachError } from './errors.js';

/**
 * Agent tokens: issued by the registry, verified by ingress and the dispatcher without calling
 * it (R-C2). Format `rt1.<claims>.<signature>`: base64url JSON claims, HMAC-SHA256 over
 * `rt1.<claims>` with a shared signing key. Expiry is in the claims; revocation (by jti) is
 * checked by the verifying service against its revocation view.
 *
 * Key rotation: a token signed from a key ring carries the key's id in the `kid` claim, and the
 * verifier picks the key by it, so several keys verify at once while only the first signs
 * (REACH_TOKEN_SECRETS `kid1:secret1,kid2:secret2`). A token without `kid` (signed with a plain
 * REACH_TOKEN_SECRET, as every token was before rotation existed) verifies against the legacy key.
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
  /** id of the signing key (absent: the legacy REACH_TOKEN_SECRET) */
  kid?: string;
}

const PREFIX = 'rt1';

/** A named signing key of the ring. */
export interface TokenKey {
  readonly kid: string;
  readonly secret: string;
}

const KID = /^[A-Za-z0-9_.-]{1,64}$/;
const MIN_SECRET_LENGTH = 16;

/**
 * Parses `kid1:secret1,kid2:secret2` (commas or newlines; blank lines and `#` comments are
 * skipped, so the same text works as a mounted secret file). The first key is the current one.
 * Throws with a message that never contains a secret.
 */
export function parseTokenKeys(spec: string): TokenKey[] {
  const keys: TokenKey[] = [];
  const entries = spec
    .split(/[,\n]/)
    .map((e) => e.trim())
    .filter((e) => e !== '' && !e.startsWith('#'));
  for (const [i, entry] of entries.entries()) {
    const colon = entry.indexOf(':');
    const kid = colon > 0 ? entry.slice(0, colon) : '';
    const secret = colon > 0 ? entry.slice(colon + 1) : '';
    if (!KID.test(kid)) throw new Error(`key ${i + 1}: expected kid:secret with a kid of letters, digits, "_", "-" or "." (at most 64)`);
    if (secret.length < MIN_SECRET_LENGTH) throw new Error(`key ${kid}: the secret needs at least ${MIN_SECRET_LENGTH} characters`);
    if (keys.some((k) => k.kid === kid)) throw new Error(`key ${kid} is listed twice`);
    keys.push({ kid, secret });
  }
  if (keys.length === 0) throw new Error('no key given (expected kid:secret[,kid:secret…])');
  return keys;
}

/**
 * The keys this process signs and verifies tokens with: the ring (first = current, the rest
 * still verify) and the legacy key for tokens without `kid`. Mutable, so a service can pick up
 * a rotated key set without a restart (and without dropping a WebSocket); `generation` lets
 * caches of verified tokens notice the change.
 */
export class TokenKeys {
  private ring: readonly TokenKey[] = [];
  private legacy: string | undefined;
  private gen = 0;

  constructor(ring: readonly TokenKey[], legacy?: string) {
    this.replace(ring, legacy);
  }

  /** Keys from REACH_TOKEN_SECRETS / REACH_TOKEN_SECRET values; undefined when both are unset. */
  static from(ringSpec: string | undefined, legacy: string | undefined): TokenKeys | undefined {
    if (!ringSpec && !legacy) return undefined;
    return new TokenKeys(ringSpec ? parseTokenKeys(ringSpec) : [], legacy);
  }

  replace(ring: readonly TokenKey[], legacy?: string): void {
    if (ring.length === 0 && !legacy) throw new Error('a token key set needs a key ring or a legacy key');
    this.ring = [...ring];
    this.legacy = legacy;
    this.gen++;
  }

  get generation(): number {
    return this.gen;
  }

  /** The key new tokens are signed with: the ring's first, else the legacy key (no kid). */
  get signing(): { kid?: string; secret: string } {
    const current = this.ring[0];
    return current ? { kid: current.kid, secret: current.secret } : { secret: this.legacy! };
  }

  /** The key that verifies a token of this kid (undefined kid: the legacy key). */
  secretFor(kid: string | undefined): string | undefined {
    if (kid === undefined) return this.legacy;
    return this.ring.find((k) => k.kid === kid)?.secret;
  }

  /** Key ids that verify, for logs (never the secrets). */
  get kids(): string[] {
    return [...this.ring.map((k) => k.kid), ...(this.legacy ? ['(legacy)'] : [])];
  }
}

/** What signs and verifies: a single legacy secret (as before rotation) or a key set. */
export type TokenSecret = string | TokenKeys;

function sign(body: string, secret: string): Buffer {
  return createHmac('sha256', secret).update(body).digest();
}

export function signToken(claims: TokenClaims, secret: TokenSecret): string {
  const key = typeof secret === 'string' ? { secret } : secret.signing;
  const { kid: _ignored, ...rest } = claims;
  const signed: TokenClaims = key.kid ? { ...rest, kid: key.kid } : rest;
  const body = `${PREFIX}.${Buffer.from(JSON.stringify(signed)).toString('base64url')}`;
  return `${body}.${sign(body, key.secret).toString('base64url')}`;
}

function fail(message: string): never {
  throw new ReachError('AUTH_FAILED', message);
}

/** Verifies signature and expiry; throws AUTH_FAILED (1003) with the reason. */
export function verifyToken(token: string | undefined | null, secret: TokenSecret, nowMs: number = Date.now()): TokenClaims {
  if (!token) fail('missing token');
  const parts = token.split('.');
  if (parts.length !== 3 || parts[0] !== PREFIX) fail('malformed token');
  // The claims are read before the signature is checked only to pick the key by kid; nothing
  // else of them is trusted until the signature matches.
  let claims: TokenClaims;
  try {
    claims = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as TokenClaims;
  } catch {
    fail('malformed token claims');
  }
  if (claims === null || typeof claims !== 'object') fail('malformed token claims');
  const kid = typeof claims.kid === 'string' ? claims.kid : undefined;
  const key = typeof secret === 'string' ? (kid === undefined ? secret : undefined) : secret.secretFor(kid);
  if (key === undefined) fail(kid === undefined ? 'token has no key id and no legacy key verifies it' : `token key ${kid} is unknown or retired`);
  const body = `${parts[0]}.${parts[1]}`;
  const given = Buffer.from(parts[2]!, 'base64url');
  const want = sign(body, key);
  if (given.length !== want.length || !timingSafeEqual(given, want)) fail('token signature is invalid');
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
 * Remembers tokens whose signature has been verified, so a producer sending thousands of
 * records a second with the same token costs one HMAC per token instead of one per record (the
 * HMAC was ~9 % of ingress's CPU under load). Expiry is still checked on every use, from the
 * cached claims; revocation is the caller's check, as with verifyToken. Only proven tokens are
 * kept, so a flood of forged tokens never fills it; it is emptied when full (bounded memory).
 */
export class VerifiedTokens {
  private readonly verified = new Map<string, TokenClaims>();
  private generation: number | undefined;

  constructor(
    private readonly secret: TokenSecret,
    private readonly maxEntries = 10_000,
  ) {}

  /** verifyToken, with the signature check skipped for a token verified before. */
  verify(token: string | undefined | null, nowMs: number = Date.now()): TokenClaims {
    // A rotated key set may have retired the key a cached token was signed with.
    if (typeof this.secret !== 'string' && this.generation !== this.secret.generation) {
      this.verified.clear();
      this.generation = this.secret.generation;
    }
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
