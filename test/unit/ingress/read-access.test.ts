import { describe, expect, it } from 'vitest';
import { mayRead, producerDomainOf } from '../../../services/ingress/dist/read-access.js';
import type { EventRow } from '../../../services/ingress/dist/read-model.js';
import { messageRow } from './message-row.js';

// Issue #13: who may read a message, its timeline, its trace and its result.
const agent = (agentId: string, domain = 'd1') => ({ agentId, admin: false, domain });
const admin = { agentId: 'admin', admin: true };
const off = { sameDomain: false };
const on = { sameDomain: true };

function event(over: Partial<EventRow>): EventRow {
  return {
    message_id: 'msg_X',
    state: 'PENDING',
    at: new Date(0),
    attempt: 0,
    service: 'ingress',
    instance: null,
    agent_id: null,
    code: null,
    reason: null,
    detail: null,
    ...over,
  };
}

const row = messageRow({ producer: 'p', agent_id: 'h2', target_agent_id: null });
const timeline = [
  event({ detail: { via: 'http', producer_domain: 'd1' } }),
  event({ state: 'DELIVERING', agent_id: 'h1' }),
  event({ state: 'DELIVERING', attempt: 1, agent_id: 'h2' }),
];

describe('mayRead', () => {
  it('lets the admin, the producer and the last handler read from the row alone', () => {
    expect(mayRead(admin, row, [], off)).toBe(true);
    expect(mayRead(agent('p'), row, [], off)).toBe(true);
    expect(mayRead(agent('h2'), row, [], off)).toBe(true);
  });

  it('lets the target of a message read it', () => {
    expect(mayRead(agent('t'), messageRow({ target_agent_id: 't' }), [], off)).toBe(true);
  });

  it('lets the handler of an earlier attempt read it through the timeline', () => {
    expect(mayRead(agent('h1'), row, timeline, off)).toBe(true);
    expect(mayRead(agent('h1'), row, [], off)).toBe(false);
  });

  it("refuses anyone else, and the producer's domain only with REACH_READS_SAME_DOMAIN", () => {
    expect(mayRead(agent('other', 'd1'), row, timeline, off)).toBe(false);
    expect(mayRead(agent('other', 'd1'), row, timeline, on)).toBe(true);
    expect(mayRead(agent('other', 'd2'), row, timeline, on)).toBe(false);
    // no recorded domain (a message from before the setting existed): only the parties
    expect(mayRead(agent('other', 'd1'), row, timeline.slice(1), on)).toBe(false);
  });
});

describe('producerDomainOf', () => {
  it('reads the domain ingress put on the PENDING event, and nothing from other states', () => {
    expect(producerDomainOf(timeline)).toBe('d1');
    expect(producerDomainOf([event({ state: 'ROUTED', detail: { producer_domain: 'd9' } })])).toBeUndefined();
    expect(producerDomainOf([event({ detail: { producer_domain: null } })])).toBeUndefined();
  });
});
