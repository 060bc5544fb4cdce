import { describe, expect, it } from 'vitest';
import { ReachError } from '@reach/core';
import { effectiveWaitMs, isFannedOut, isSettled, nextPollDelay, parseWaitMs } from '../../../services/ingress/dist/wait-policy.js';
import { waitReply } from '../../../services/ingress/dist/http-api.js';
import { messageRow as row } from './message-row.js';

describe('wait policy', () => {
  it('parses wait_ms as a non-negative integer', () => {
    expect(parseWaitMs(null)).toBeUndefined();
    expect(parseWaitMs('')).toBeUndefined();
    expect(parseWaitMs('0')).toBe(0);
    expect(parseWaitMs('1500')).toBe(1500);
    for (const bad of ['-1', '1.5', 'soon', '1e3', '99999999999']) {
      expect(() => parseWaitMs(bad)).toThrow(ReachError);
    }
  });

  it('waits at most the message timeout and REACH_MAX_WAIT_MS', () => {
    expect(effectiveWaitMs(5000, null, 60000)).toBe(5000);
    expect(effectiveWaitMs(5000, 300, 60000)).toBe(300);
    expect(effectiveWaitMs(120000, undefined, 60000)).toBe(60000);
    expect(effectiveWaitMs(5000, 300, 100)).toBe(100);
  });

  it('is settled by a result or a failure, not by progress', () => {
    expect(isSettled(undefined)).toBe(false);
    expect(isSettled(row({ status: 'DELIVERING' }))).toBe(false);
    // Acked by its agent, its result may still come (an agent may ack before it sends it).
    expect(isSettled(row({ status: 'DELIVERED', agent_id: 'a1' }))).toBe(false);
    expect(isSettled(row({ status: 'DELIVERED', agent_id: 'a1', result: { status: 'ok' } }))).toBe(true);
    expect(isSettled(row({ status: 'REJECTED' }))).toBe(true);
    expect(isSettled(row({ status: 'DEAD' }))).toBe(true);
  });

  it('is settled by a fan-out: DELIVERED by the router, with no agent, no result will come', () => {
    const parent = row({ status: 'DELIVERED', topic: 'news', capability: null });
    expect(isFannedOut(parent)).toBe(true);
    expect(isSettled(parent)).toBe(true);
    expect(isFannedOut(row({ status: 'ROUTED', topic: 'news', capability: null }))).toBe(false);
    expect(isFannedOut(row({ status: 'DELIVERED', agent_id: 'a1' }))).toBe(false);
    expect(isFannedOut(undefined)).toBe(false);
  });

  it('polls at growing intervals up to a cap', () => {
    const delays = [nextPollDelay(undefined)];
    for (let i = 0; i < 12; i++) delays.push(nextPollDelay(delays[delays.length - 1]));
    expect(delays[0]).toBe(20);
    for (let i = 1; i < delays.length; i++) expect(delays[i]!).toBeGreaterThanOrEqual(delays[i - 1]!);
    expect(Math.max(...delays)).toBe(500);
  });
});

describe('waitReply', () => {
  it('answers 200 with the result', () => {
    const r = waitReply('msg_X', row({ status: 'DELIVERED', result: { status: 'ok', payload: 1 } }), false, 10);
    expect(r).toEqual({ status: 200, body: { message_id: 'msg_X', status: 'DELIVERED', result: { status: 'ok', payload: 1 } } });
  });

  it("answers a failed message with its own code and that code's HTTP status", () => {
    const r = waitReply('msg_X', row({ status: 'REJECTED', code: 2001, reason: 'no live agent' }), false, 10);
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ error: { code: 2001, name: 'NO_ROUTE', message: 'no live agent', details: { message_id: 'msg_X', status: 'REJECTED' } } });
    expect(waitReply('msg_X', row({ status: 'DEAD', code: 3004 }), false, 10).status).toBe(502);
  });

  it('answers a fanned-out message 200 with its copies, and without them when they could not be read', () => {
    const parent = row({ status: 'DELIVERED', topic: 'news', capability: null });
    const copies = { copies: [{ message_id: 'msg_C', agent_id: 'a1', status: 'ROUTED', code: null }], total: 1 };
    expect(waitReply('msg_X', parent, false, 10, copies)).toEqual({
      status: 200,
      body: { message_id: 'msg_X', status: 'DELIVERED', copies: copies.copies, copies_total: 1 },
    });
    expect(waitReply('msg_X', parent, false, 10)).toEqual({ status: 200, body: { message_id: 'msg_X', status: 'DELIVERED' } });
  });

  it('answers 504 ACK_TIMEOUT when the time ran out', () => {
    const r = waitReply('msg_X', row({ status: 'DELIVERING' }), true, 1200);
    expect(r.status).toBe(504);
    expect(r.body).toMatchObject({ error: { code: 3002, name: 'ACK_TIMEOUT', details: { message_id: 'msg_X', status: 'DELIVERING' } } });
    expect(waitReply('msg_X', undefined, true, 5).body).toMatchObject({ error: { code: 3002, details: { status: 'PENDING' } } });
  });
});
