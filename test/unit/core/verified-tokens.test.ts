import { describe, expect, it } from 'vitest';
import { signToken, VerifiedTokens, type TokenClaims } from '@reach/core';

const SECRET = 'a-test-secret-of-some-length';
const claims = (over: Partial<TokenClaims> = {}): TokenClaims => ({ sub: 'agent.a', jti: 'jti-1', iat: 1_000, exp: 2_000, dom: 'default', ...over });

describe('VerifiedTokens', () => {
  it('returns the claims of a genuine token, the first time and from the cache', () => {
    const cache = new VerifiedTokens(SECRET);
    const token = signToken(claims(), SECRET);
    expect(cache.verify(token, 1_500_000).sub).toBe('agent.a');
    expect(cache.verify(token, 1_600_000).jti).toBe('jti-1');
  });

  it('refuses a cached token once it has expired', () => {
    const cache = new VerifiedTokens(SECRET);
    const token = signToken(claims(), SECRET);
    cache.verify(token, 1_500_000);
    expect(() => cache.verify(token, 2_000_000)).toThrow(/expired/);
  });

  it('never caches a forged token: it is refused every time', () => {
    const cache = new VerifiedTokens(SECRET);
    const forged = signToken(claims(), 'another-secret-entirely');
    expect(() => cache.verify(forged, 1_500_000)).toThrow(/signature/);
    expect(() => cache.verify(forged, 1_500_000)).toThrow(/signature/);
    expect(() => cache.verify(undefined, 1_500_000)).toThrow(/missing/);
  });

  it('stays bounded: a full cache starts over and still verifies', () => {
    const cache = new VerifiedTokens(SECRET, 2);
    const tokens = ['a', 'b', 'c'].map((s) => signToken(claims({ sub: s, jti: s }), SECRET));
    for (const t of tokens) cache.verify(t, 1_500_000);
    expect(tokens.map((t) => cache.verify(t, 1_500_000).sub)).toEqual(['a', 'b', 'c']);
  });
});
