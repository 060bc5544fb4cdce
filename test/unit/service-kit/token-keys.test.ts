import { describe, expect, it } from 'vitest';
import { silentLogger, signToken, verifyToken, type TokenClaims } from '@reach/core';
import { hasTokenKeyEnv, loadTokenKeys, requireTokenKeys, watchTokenKeys } from '@reach/service-kit';

const K1 = 'k1-secret-0123456789abcdef';
const K2 = 'k2-secret-0123456789abcdef';
const LEGACY = 'legacy-secret-0123456789abcdef';
const claims = (): TokenClaims => ({ sub: 'a', jti: 'j', iat: 1, exp: Math.floor(Date.now() / 1000) + 60, dom: 'default' });
const cfg = { tokenSecret: LEGACY, tokenSecrets: undefined, tokenSecretsFile: '/run/secrets/keys', tokenSecretsReloadMs: 10 };

describe('loadTokenKeys', () => {
  it('the file wins over REACH_TOKEN_SECRETS; REACH_TOKEN_SECRET stays the legacy key', () => {
    const keys = loadTokenKeys({ ...cfg, tokenSecrets: `k9:${K2}` }, () => `k1:${K1}`)!;
    expect(keys.kids).toEqual(['k1', '(legacy)']);
  });

  it('an unreadable or invalid file is a configuration error naming it', () => {
    expect(() => loadTokenKeys(cfg, () => 'garbage')).toThrow(/REACH_TOKEN_SECRETS_FILE=\/run\/secrets\/keys is invalid/);
    expect(() =>
      loadTokenKeys(cfg, () => {
        throw new Error('ENOENT');
      }),
    ).toThrow(/cannot be read/);
  });

  it('nothing configured: undefined, and the services that need keys say which variables', () => {
    expect(loadTokenKeys({ tokenSecret: undefined, tokenSecrets: undefined, tokenSecretsFile: '', tokenSecretsReloadMs: 10 })).toBeUndefined();
    expect(() => requireTokenKeys(undefined, 'ingress')).toThrow(/REACH_TOKEN_SECRET is required \(or REACH_TOKEN_SECRETS/);
    expect(hasTokenKeyEnv({ REACH_TOKEN_SECRETS_FILE: '/x' })).toBe(true);
    expect(hasTokenKeyEnv({ REACH_TOKEN_SECRET: '' })).toBe(false);
  });
});

describe('watchTokenKeys: a rotation without restart', () => {
  it('picks up a rewritten file, keeps the keys when the new text is broken', async () => {
    let text = `k1:${K1}`;
    const keys = loadTokenKeys(cfg, () => text)!;
    const oldToken = signToken(claims(), keys);
    const job = watchTokenKeys(keys, cfg, silentLogger, () => text);
    job.start();
    try {
      text = `k2:${K2},k1:${K1}`;
      await expect.poll(() => keys.signing.kid).toBe('k2');
      expect(verifyToken(oldToken, keys).sub).toBe('a');
      text = 'k3:'; // half-written
      await new Promise((r) => setTimeout(r, 50));
      expect(keys.kids).toEqual(['k2', 'k1', '(legacy)']);
      text = `k2:${K2}`;
      await expect.poll(() => keys.kids.join(',')).toBe('k2,(legacy)');
      expect(() => verifyToken(oldToken, keys)).toThrow(/k1 is unknown or retired/);
    } finally {
      await job.stop();
    }
  });
});
