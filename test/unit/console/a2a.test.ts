import { describe, expect, it } from 'vitest';
import { a2aIdsOf, isA2aAgent } from '../../../services/console/web/dist/a2a.js';

describe('console A2A marks (issue #29 §4)', () => {
  it('marks an agent whose endpoints speak A2A', () => {
    expect(isA2aAgent({ endpoints: { protocol_version: 'a2a/1.0' } })).toBe(true);
    expect(isA2aAgent({ endpoints: { protocol_version: '1' } })).toBe(false);
    expect(isA2aAgent({})).toBe(false);
  });

  it("finds a message's A2A ids in its timeline: the client's messageId and the agents' task ids", () => {
    const events = [
      { state: 'PENDING', detail: { via: 'a2a', a2a_message_id: 'client-msg-1' } },
      { state: 'DELIVERING', detail: null },
      { state: 'DELIVERED', detail: { result: { status: 'ok' }, a2a_task_id: 'remote-task-9' } },
    ];
    expect(a2aIdsOf(events)).toEqual({ clientMessageId: 'client-msg-1', agentTaskIds: ['remote-task-9'] });
    expect(a2aIdsOf([{ state: 'PENDING', detail: { via: 'http' } }])).toEqual({ agentTaskIds: [] });
  });
});
