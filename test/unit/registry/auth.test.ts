import { describe, expect, it } from 'vitest';
import { ReachError, signToken } from '@reach/core';
import { authorizeAgent, authorizeRegistration, identifyCaller, type AuthSecrets } from '../../../services/registry/src/auth.js';

// docs/design.md §3 registry auth: admin always; enrollment token when configured; an existing id only
// with its own token (no hijacking); heartbeat/deregister only by the agent itself or the admin.
const SECRET = 'unit-test-secret-0123456789';
const secrets: AuthSecrets = { tokenSecret: SECRET, adminToken: 'admin-token-0123456789', enrollmentToken: undefined };
const now = Date.now();

function agentToken(sub: string, expInS = 3600): string {
  const iat = Math.floor(now / 1000);
  return signToken({ sub, jti: 'tok_1', iat, exp: iat + expInS, dom: 'default' }, SECRET);
}

function authFailure(fn: () => unknown): ReachError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ReachError);
    expect((err as ReachError).code).toBe(1003);
    expect((err as ReachError).httpStatus).toBe(401);
    return err as ReachError;
  }
  throw new Error('expected 1003 AUTH_FAILED');
}

describe('identifyCaller', () => {
  it('tells admin, enrollment, agent and anonymous apart', () => {
    const withEnrollment = { ...secrets, enrollmentToken: 'enroll-token-0123456789' };
    expect(identifyCaller(undefined, secrets)).toEqual({ kind: 'anonymous' });
    expect(identifyCaller('Bearer admin-token-0123456789', secrets)).toEqual({ kind: 'admin' });
    expect(identifyCaller('Bearer enroll-token-0123456789', withEnrollment)).toEqual({ kind: 'enrollment' });
    expect(identifyCaller(`Bearer ${agentToken('a.1')}`, secrets)).toMatchObject({ kind: 'agent', claims: { sub: 'a.1' } });
  });

  it('refuses a bearer token that is none of them, or an expired one', () => {
    authFailure(() => identifyCaller('Bearer enroll-token-0123456789', secrets));
    expect(authFailure(() => identifyCaller(`Bearer ${agentToken('a.1', -1)}`, secrets)).message).toMatch(/expired/);
    authFailure(() => identifyCaller(`Bearer ${agentToken('a.1')}x`, secrets));
  });
});

describe('authorizeRegistration', () => {
  it('lets the admin and the agent itself replace a registration', () => {
    expect(authorizeRegistration({ kind: 'admin' }, 'a.1', true)).toEqual({ mustNotExist: false });
    const claims = { sub: 'a.1', jti: 't', iat: 0, exp: 0, dom: 'default' };
    expect(authorizeRegistration({ kind: 'agent', claims }, 'a.1', true)).toEqual({ mustNotExist: false });
    authFailure(() => authorizeRegistration({ kind: 'agent', claims }, 'a.2', false));
  });

  it('lets others only create new ids: open without an enrollment token, else enrollment only', () => {
    expect(authorizeRegistration({ kind: 'anonymous' }, 'a.1', false)).toEqual({ mustNotExist: true });
    expect(authorizeRegistration({ kind: 'enrollment' }, 'a.1', true)).toEqual({ mustNotExist: true });
    authFailure(() => authorizeRegistration({ kind: 'anonymous' }, 'a.1', true));
  });
});

describe('authorizeAgent', () => {
  it('accepts the agent itself and the admin, nobody else', () => {
    const claims = { sub: 'a.1', jti: 't', iat: 0, exp: 0, dom: 'default' };
    expect(() => authorizeAgent({ kind: 'admin' }, 'a.1')).not.toThrow();
    expect(() => authorizeAgent({ kind: 'agent', claims }, 'a.1')).not.toThrow();
    authFailure(() => authorizeAgent({ kind: 'agent', claims }, 'a.2'));
    authFailure(() => authorizeAgent({ kind: 'anonymous' }, 'a.1'));
    authFailure(() => authorizeAgent({ kind: 'enrollment' }, 'a.1'));
  });
});
