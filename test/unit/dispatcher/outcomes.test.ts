import { describe, expect, it } from 'vitest';
import { classifyPushResponse } from '../../../services/dispatcher/dist/http-push.js';
import { resultContextTtlS } from '../../../services/dispatcher/dist/entry.js';

describe('dispatcher: what an HTTP push answer means (R-C8)', () => {
  it('2xx is an ack; a {result} body is a result too', () => {
    expect(classifyPushResponse(204, '')).toEqual({ kind: 'ack' });
    expect(classifyPushResponse(200, 'not json')).toEqual({ kind: 'ack' });
    expect(classifyPushResponse(200, '{"result":{"status":"ok","payload":{"a":1}}}')).toEqual({ kind: 'ack', result: { status: 'ok', payload: { a: 1 } } });
    expect(classifyPushResponse(201, '{"result":{"status":"error"}}')).toEqual({ kind: 'ack', result: { status: 'error', payload: null } });
  });

  it('4xx is a reject with the agent error code and message when it gives them', () => {
    expect(classifyPushResponse(422, '{"error":{"code":"NOPE","message":"no"}}')).toEqual({ kind: 'reject', code: 'NOPE', reason: 'no' });
    expect(classifyPushResponse(400, '{"reason":"bad input"}')).toEqual({ kind: 'reject', code: 400, reason: 'bad input' });
    expect(classifyPushResponse(404, '')).toEqual({ kind: 'reject', code: 404, reason: 'HTTP 404' });
  });

  it('5xx (and anything else) is a failure', () => {
    expect(classifyPushResponse(503, '{"error":"down"}')).toEqual({ kind: 'failure', reason: 'HTTP 503' });
    expect(classifyPushResponse(302, '')).toEqual({ kind: 'failure', reason: 'HTTP 302' });
  });
});

describe('dispatcher: how long a result may follow an ack', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  const iso = (ms: number) => new Date(ms).toISOString();

  it('lasts until the message times out or expires, at least a minute', () => {
    expect(resultContextTtlS({ created_at: iso(now), timeout_ms: 300_000, expire_at: null }, now, 1800)).toBe(300);
    expect(resultContextTtlS({ created_at: iso(now), timeout_ms: 300_000, expire_at: iso(now + 120_000) }, now, 1800)).toBe(120);
    expect(resultContextTtlS({ created_at: iso(now - 600_000), timeout_ms: 1000, expire_at: null }, now, 1800)).toBe(60);
  });

  it('is 0 for messages nobody answers (results, receipts)', () => {
    expect(resultContextTtlS({ message_type: 'task_result', created_at: iso(now) }, now, 1800)).toBe(0);
    expect(resultContextTtlS({ message_type: 'reach.receipt', created_at: iso(now) }, now, 1800)).toBe(0);
  });

  it('is 5 minutes without bounds and never beyond the replay TTL', () => {
    expect(resultContextTtlS({ created_at: iso(now), timeout_ms: null, expire_at: null }, now, 1800)).toBe(300);
    expect(resultContextTtlS({ created_at: iso(now), timeout_ms: 86_400_000, expire_at: null }, now, 1800)).toBe(1800);
  });
});
