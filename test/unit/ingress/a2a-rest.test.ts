import { describe, expect, it } from 'vitest';
import { A2aError } from '@reach/a2a';
import { listParamsOf, reasonOf, restError } from '../../../services/ingress/dist/a2a-rest.js';

describe('the HTTP+JSON binding’s framing', () => {
  it('names an A2A error in UPPER_SNAKE_CASE without "Error" (spec §11.6) and answers its §5.4 HTTP status', () => {
    expect(reasonOf('TaskNotFoundError')).toBe('TASK_NOT_FOUND');
    expect(reasonOf('VersionNotSupportedError')).toBe('VERSION_NOT_SUPPORTED');
    const r = restError(new A2aError('TaskNotCancelableError', 'delivered'));
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({
      error: { code: 400, status: 'FAILED_PRECONDITION', message: 'delivered', details: [{ reason: 'TASK_NOT_CANCELABLE', domain: 'a2a-protocol.org' }] },
    });
  });
  it('reads ListTasks parameters from the query string in camelCase', () => {
    expect(listParamsOf(new URLSearchParams('contextId=c&status=TASK_STATE_WORKING&pageSize=5&includeArtifacts=true'))).toEqual({
      contextId: 'c',
      status: 'TASK_STATE_WORKING',
      pageSize: 5,
      includeArtifacts: true,
    });
  });
});
