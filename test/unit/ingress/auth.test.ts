import { describe, expect, it } from 'vitest';
import { ReachError, signToken } from '@reach/core';
import { ADMIN_PRODUCER, Authenticator } from '../../../services/ingress/dist/auth.js';

const SECRET = 'unit-test-secret-0123456789';
const ADMIN = 'unit-admin-token-0123456789';
const revoked = new Set<string>();
const auth = new Authenticator(SECRET, ADMIN, { has: (jti) => revoked.has(jti) });
const now = Math.floor(Date.now() / 1000);
const token = (sub: string, jti = `j-${sub}`, exp = now + 600) => signToken({ sub, jti, iat: now, exp, dom: 'default' }, SECRET);

function code(fn: () => unknown): number | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err instanceof ReachError ? err.code : -1;
  }
}

describe('Authenticator', () => {
  it("names the token's agent", () => {
    expect(auth.authenticate(token('agent.a'))).toEqual({ agentId: 'agent.a', admin: false, domain: 'default' });
  });

  it('accepts the admin token as the admin producer', () => {
    expect(auth.authenticate(ADMIN)).toEqual({ agentId: ADMIN_PRODUCER, admin: true });
  });

  it('refuses missing, forged, foreign, expired and revoked tokens with 1003', () => {
    expect(code(() => auth.authenticate(undefined))).toBe(1003);
    expect(code(() => auth.authenticate('rt1.x.y'))).toBe(1003);
    expect(code(() => auth.authenticate(signToken({ sub: 'a', jti: 'j', iat: now, exp: now + 60, dom: 'd' }, 'another-secret-0123456')))).toBe(1003);
    expect(code(() => auth.authenticate(token('agent.a', 'j-exp', now - 1)))).toBe(1003);
    revoked.add('j-revoked');
    expect(code(() => auth.authenticate(token('agent.a', 'j-revoked')))).toBe(1003);
  });

  it('identifies the holder of any validly signed token, never of a forged one', () => {
    expect(auth.identify(token('agent.b', 'j2', now - 10))).toBe('agent.b');
    expect(auth.identify(token('agent.b', 'j-revoked'))).toBe('agent.b');
    expect(auth.identify(ADMIN)).toBe(ADMIN_PRODUCER);
    expect(auth.identify(undefined)).toBeUndefined();
    expect(auth.identify(`${token('agent.b').slice(0, -2)}xx`)).toBeUndefined();
  });

  it("requires the envelope's producer to be the token's agent, except for the admin", () => {
    expect(code(() => Authenticator.checkProducer({ agentId: 'agent.a', admin: false }, 'agent.a'))).toBeUndefined();
    expect(code(() => Authenticator.checkProducer({ agentId: 'agent.a', admin: false }, 'agent.b'))).toBe(1003);
    expect(code(() => Authenticator.checkProducer({ agentId: ADMIN_PRODUCER, admin: true }, 'agent.b'))).toBeUndefined();
  });
});
