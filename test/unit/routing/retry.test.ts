import { describe, expect, it } from 'vitest';
import { fanoutCopy, FANOUT_AGENT, FANOUT_PARENT, HOLD_REASON_SATURATED, isHold, republishAttempt, republishHeaders } from '@reach/routing';
import { envelope } from './fixtures.js';

describe('retry requests', () => {
  it('re-publishes a failed attempt as the next attempt, and a saturation hold as the same attempt', () => {
    expect(republishAttempt({ attempt: 0, reason: 'ACK_TIMEOUT' })).toBe(1);
    expect(republishAttempt({ attempt: 2, reason: 'CONNECTION_CLOSED' })).toBe(3);
    expect(republishAttempt({ attempt: 2, reason: HOLD_REASON_SATURATED })).toBe(2);
    expect(isHold({ reason: 'SATURATED' })).toBe(true);
  });

  it('carries attempt, exclusions (deduplicated) and trace context as Kafka headers', () => {
    expect(republishHeaders({ attempt: 1, reason: 'ACK_TIMEOUT', exclude_agent_ids: ['a', 'b', 'a'] }, '00-abc-def-01')).toEqual({
      'reach-attempt': '2',
      'reach-exclude-agents': 'a,b',
      traceparent: '00-abc-def-01',
    });
    expect(republishHeaders({ attempt: 0, reason: 'SATURATED', exclude_agent_ids: [] }, undefined)).toEqual({ 'reach-attempt': '0' });
  });
});

describe('fan-out copies', () => {
  it('get their own id, keep the content, and name their parent and subscriber', () => {
    const parent = envelope({ capability: null, topic: 'news', headers: { x: '1' } });
    const copy = fanoutCopy(parent, 'sub-1', 'msg_copy');
    expect(copy).toEqual({ ...parent, message_id: 'msg_copy', headers: { x: '1', [FANOUT_PARENT]: parent.message_id, [FANOUT_AGENT]: 'sub-1' } });
    expect(parent.headers).toEqual({ x: '1' });
  });
});
