import { describe, expect, it } from 'vitest';
import { signToken } from '@reach/core';
import { actorOf, resultOf } from '@reach/service-kit';
import { auditQuery } from '../../../services/registry/src/audit-api.js';

// Issue #13: the audit trail names who acted and how it ended, and its query is validated.
const secrets = { adminToken: 'admin-token-0123456789', tokenSecret: 'unit-test-secret-0123456789', enrollmentToken: 'enroll-token-0123456789' };
const agentToken = (exp: number) => signToken({ sub: 'agent.a', jti: 'tok_1', iat: 0, exp, dom: 'default' }, secrets.tokenSecret);

describe('actorOf', () => {
  it('names the admin, the enrollment token, an agent (even with an expired token), a stranger and nobody', () => {
    expect(actorOf('Bearer admin-token-0123456789', secrets)).toBe('admin');
    expect(actorOf('Bearer enroll-token-0123456789', secrets)).toBe('enrollment');
    expect(actorOf(`Bearer ${agentToken(1)}`, secrets)).toBe('agent:agent.a');
    expect(actorOf(`Bearer ${agentToken(1)}x`, secrets)).toBe('invalid-token');
    expect(actorOf('Bearer rt1.nope', secrets)).toBe('invalid-token');
    expect(actorOf(undefined, secrets)).toBe('anonymous');
  });
});

describe('resultOf', () => {
  it('tells a refusal (401/403) from a failure and a success', () => {
    expect([200, 201, 401, 403, 404, 409, 500].map(resultOf)).toEqual(['ok', 'ok', 'denied', 'denied', 'failed', 'failed', 'failed']);
  });
});

describe('auditQuery', () => {
  it('builds the filter from action, actor, result, since, until and limit', () => {
    const q = auditQuery(
      new URLSearchParams({ action: 'dlq.purge', actor: 'admin', result: 'denied', since: '2026-01-01T00:00:00Z', until: '1767225600000', limit: '5' }),
    );
    expect(q.where).toBe('WHERE action = $1 AND actor = $2 AND result = $3 AND at >= $4 AND at < $5');
    expect(q.params).toEqual(['dlq.purge', 'admin', 'denied', new Date('2026-01-01T00:00:00Z'), new Date(1767225600000)]);
    expect(q.limit).toBe(5);
    expect(auditQuery(new URLSearchParams())).toEqual({ where: '', params: [], limit: 100 });
  });

  it('refuses unknown filters and bad values with 4101 naming the field', () => {
    for (const [k, v] of [
      ['colour', 'red'],
      ['result', 'maybe'],
      ['limit', '0'],
      ['limit', '1001'],
      ['since', 'yesterday'],
      ['action', "x'; DROP TABLE audit_log"],
    ]) {
      expect(() => auditQuery(new URLSearchParams({ [k!]: v! }))).toThrow(expect.objectContaining({ code: 4101, details: { field: k } }));
    }
  });
});
