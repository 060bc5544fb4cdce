import { describe, expect, it } from 'vitest';
import { signToken } from '@reach/core';
import { adminOnly } from '@reach/service-kit';

const ADMIN = 'admin-token-0123456789abcdef';
const SECRET = 'token-secret-0123456789abcdef';
const secrets = { adminToken: ADMIN, tokenSecret: SECRET };
const bearer = (token: string) => `Bearer ${token}`;
const agentToken = (exp: number) => signToken({ sub: 'agent.a1', jti: 'j', iat: 0, exp, dom: 'default' }, SECRET);
const now = () => Math.floor(Date.now() / 1000);

describe('adminOnly: the gate of every admin endpoint (docs/design.md §3)', () => {
  it('lets the admin token through', () => {
    expect(adminOnly(bearer(ADMIN), secrets, 'the test API')).toBeUndefined();
  });

  it('answers 401 with 1003 for no token or one nobody issued', () => {
    expect(adminOnly(undefined, secrets, 'the test API')).toMatchObject({ status: 401, body: { error: { code: 1003, name: 'AUTH_FAILED' } } });
    expect(adminOnly(bearer('nope'), secrets, 'the test API')?.status).toBe(401);
    const foreign = signToken({ sub: 'x', jti: 'j', iat: 0, exp: now() + 60, dom: 'default' }, 'another-secret-0123456789');
    expect(adminOnly(bearer(foreign), secrets, 'the test API')?.status).toBe(401);
  });

  it('answers 403 to a genuine agent token, expired or not, naming the agent and the API', () => {
    const live = adminOnly(bearer(agentToken(now() + 60)), secrets, 'the test API');
    expect(live).toMatchObject({ status: 403, body: { error: { code: 1003 } } });
    expect(JSON.stringify(live?.body)).toMatch(/agent\.a1 may not use the test API/);
    expect(adminOnly(bearer(agentToken(now() - 60)), secrets, 'the test API')?.status).toBe(403);
  });

  it('refuses everyone when no admin token is configured', () => {
    expect(adminOnly(bearer(ADMIN), { adminToken: undefined, tokenSecret: SECRET }, 'the test API')?.status).toBe(401);
  });
});
