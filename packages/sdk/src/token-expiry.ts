/**
 * When to refresh an agent token. Tokens are `rt1.<base64url claims>.<signature>` (issued by
 * the registry, packages/core token.ts) with `iat`/`exp` in epoch seconds; the SDK only reads
 * the claims — it cannot and need not verify the signature. An unreadable token is assumed to
 * live for the default REACH_TOKEN_TTL_S (3600 s).
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

export function tokenLifetime(token: string): { issuedAt: number; expiresAt: number } | undefined {
  const parts = token.split('.');
  if (parts.length !== 3) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as { iat?: unknown; exp?: unknown };
    if (typeof claims.exp !== 'number') return undefined;
    const expiresAt = claims.exp * 1000;
    const issuedAt = typeof claims.iat === 'number' ? claims.iat * 1000 : expiresAt - 3600_000;
    return { issuedAt, expiresAt };
  } catch {
    return undefined;
  }
}

/** Milliseconds from `now` until the token should be renewed: at `ratio` of its lifetime. */
export function refreshDelayMs(token: string, now: number, ratio = 0.8, fallbackLifetimeMs = 3600_000): number {
  const life = tokenLifetime(token) ?? { issuedAt: now, expiresAt: now + fallbackLifetimeMs };
  const at = life.issuedAt + (life.expiresAt - life.issuedAt) * ratio;
  return Math.min(Math.max(Math.round(at - now), 1000), MAX_TIMER_MS);
}
