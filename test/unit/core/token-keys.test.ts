import { describe, expect, it } from 'vitest';
import { parseTokenKeys, signToken, TokenKeys, VerifiedTokens, verifyToken, type TokenClaims } from '@reach/core';

const OLD = 'old-secret-0123456789abcdef';
const K1 = 'k1-secret-0123456789abcdef';
const K2 = 'k2-secret-0123456789abcdef';
const claims = (): TokenClaims => ({ sub: 'agent.a', jti: 'j1', iat: 1, exp: Math.floor(Date.now() / 1000) + 60, dom: 'default' });
const kidOf = (token: string) => (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as TokenClaims).kid;

describe('parseTokenKeys (REACH_TOKEN_SECRETS)', () => {
  it('reads kid:secret pairs, first = current, commas or lines, comments skipped', () => {
    expect(parseTokenKeys(`k2:${K2},k1:${K1}`)).toEqual([
      { kid: 'k2', secret: K2 },
      { kid: 'k1', secret: K1 },
    ]);
    expect(parseTokenKeys(`# rotated 2026-12-01\nk2:${K2}\n\nk1:${K1}\n`).map((k) => k.kid)).toEqual(['k2', 'k1']);
  });

  it('keeps every colon after the first in the secret', () => {
    expect(parseTokenKeys('k1:a:b:c:0123456789abcdef')[0]!.secret).toBe('a:b:c:0123456789abcdef');
  });

  it.each([
    ['', /no key/],
    [`:${K1}`, /kid/],
    ['k1', /kid/],
    ['k1:short', /at least 16/],
    [`k1:${K1},k1:${K2}`, /listed twice/],
    [`bad kid:${K1}`, /kid/],
  ])('refuses %j without echoing a secret', (spec, why) => {
    let message = '';
    try {
      parseTokenKeys(spec);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(why);
    expect(message).not.toContain(K1);
    expect(message).not.toContain(K2);
  });
});

describe('signing and verifying with a key ring', () => {
  it('a single secret signs without kid, exactly as before rotation existed', () => {
    const t = signToken(claims(), OLD);
    expect(kidOf(t)).toBeUndefined();
    expect(verifyToken(t, OLD).sub).toBe('agent.a');
  });

  it('the ring signs with its first key and names it in kid; older ring keys still verify', () => {
    const before = new TokenKeys(parseTokenKeys(`k1:${K1}`));
    const after = new TokenKeys(parseTokenKeys(`k2:${K2},k1:${K1}`));
    const old = signToken(claims(), before);
    const fresh = signToken(claims(), after);
    expect(kidOf(old)).toBe('k1');
    expect(kidOf(fresh)).toBe('k2');
    expect(verifyToken(old, after).sub).toBe('agent.a');
    expect(verifyToken(fresh, after).sub).toBe('agent.a');
    // the previous set does not know k2
    expect(() => verifyToken(fresh, before)).toThrow(/key k2 is unknown or retired/);
  });

  it('a token without kid verifies against the legacy key only', () => {
    const legacyToken = signToken(claims(), OLD);
    expect(verifyToken(legacyToken, new TokenKeys(parseTokenKeys(`k1:${K1}`), OLD)).sub).toBe('agent.a');
    expect(() => verifyToken(legacyToken, new TokenKeys(parseTokenKeys(`k1:${K1}`)))).toThrow(/no key id and no legacy key/);
    // and a plain-string verifier (the old API) refuses kid tokens instead of trying its one key
    expect(() => verifyToken(signToken(claims(), new TokenKeys(parseTokenKeys(`k1:${K1}`))), K1)).toThrow(/unknown or retired/);
  });

  it('a retired key no longer verifies, and a forged kid gets nowhere', () => {
    const keys = new TokenKeys(parseTokenKeys(`k1:${K1}`));
    const t = signToken(claims(), keys);
    keys.replace(parseTokenKeys(`k2:${K2}`));
    expect(() => verifyToken(t, keys)).toThrow(/key k1 is unknown or retired/);
    // claims re-labelled with the current kid but signed with the old key: bad signature
    const [prefix, body, sig] = t.split('.');
    const relabelled = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(body!, 'base64url').toString()), kid: 'k2' })).toString('base64url');
    expect(() => verifyToken(`${prefix}.${relabelled}.${sig}`, keys)).toThrow(/signature is invalid/);
  });

  it('a signToken caller passing claims with a kid cannot pick the label', () => {
    const t = signToken({ ...claims(), kid: 'k9' }, OLD);
    expect(kidOf(t)).toBeUndefined();
  });

  it('VerifiedTokens forgets its cache when the key set changes (a retired key stops working at once)', () => {
    const keys = new TokenKeys(parseTokenKeys(`k1:${K1}`));
    const cache = new VerifiedTokens(keys);
    const t = signToken(claims(), keys);
    expect(cache.verify(t).sub).toBe('agent.a');
    keys.replace(parseTokenKeys(`k2:${K2}`));
    expect(() => cache.verify(t)).toThrow(/unknown or retired/);
  });

  it('TokenKeys.from: nothing configured is undefined; kids are listed without secrets', () => {
    expect(TokenKeys.from(undefined, undefined)).toBeUndefined();
    const keys = TokenKeys.from(`k2:${K2},k1:${K1}`, OLD)!;
    expect(keys.kids).toEqual(['k2', 'k1', '(legacy)']);
    expect(keys.signing.kid).toBe('k2');
    expect(TokenKeys.from(undefined, OLD)!.signing).toEqual({ secret: OLD });
  });
});
