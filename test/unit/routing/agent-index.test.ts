import { describe, expect, it } from 'vitest';
import { AgentIndex, newerAgentRecord, newerPresence } from '@reach/routing';
import { agent, cap, connected, NOW } from './fixtures.js';

describe('AgentIndex (the local registry view, R-A6)', () => {
  it('indexes agents by capability name and re-indexes on change', () => {
    const index = new AgentIndex();
    index.upsertAgent(agent('a', { caps: [cap('parse_pdf'), cap('ocr')] }));
    index.upsertAgent(agent('b', { caps: [cap('parse_pdf')] }));
    expect(
      index
        .withCapability('parse_pdf')
        .map((a) => a.agent_id)
        .sort(),
    ).toEqual(['a', 'b']);
    expect(index.withCapability('ocr').map((a) => a.agent_id)).toEqual(['a']);

    // Re-registration with other capabilities replaces the old index entries (no stale entry).
    index.upsertAgent(agent('a', { revision: 2, caps: [cap('translate')] }));
    expect(index.withCapability('parse_pdf').map((a) => a.agent_id)).toEqual(['b']);
    expect(index.withCapability('ocr')).toEqual([]);
    expect(index.withCapability('translate').map((a) => a.agent_id)).toEqual(['a']);
  });

  it('ignores a record with an older revision', () => {
    const index = new AgentIndex();
    expect(index.upsertAgent(agent('a', { revision: 5, currentLoad: 1 }))).toBe(true);
    expect(index.upsertAgent(agent('a', { revision: 4, currentLoad: 9, caps: [cap('other')] }))).toBe(false);
    expect(index.agent('a')?.load.current_load).toBe(1);
    expect(index.withCapability('other')).toEqual([]);
    expect(index.upsertAgent(agent('a', { revision: 5, currentLoad: 2 }))).toBe(true);
    expect(index.agent('a')?.load.current_load).toBe(2);
    expect(newerAgentRecord(agent('a', { revision: 3 }), agent('a', { revision: 4 }))).toBe(false);
    expect(newerAgentRecord(agent('a', { revision: 4 }), undefined)).toBe(true);
  });

  it('drops an agent on its tombstone', () => {
    const index = new AgentIndex();
    index.upsertAgent(agent('a'));
    index.removeAgent('a');
    expect(index.agent('a')).toBeUndefined();
    expect(index.withCapability('parse_pdf')).toEqual([]);
    expect(index.size).toBe(0);
    index.removeAgent('never-there');
  });

  it('keeps the newest presence', () => {
    const index = new AgentIndex();
    index.setPresence(connected('a', NOW));
    expect(index.setPresence({ ...connected('a', NOW - 1), connected: false })).toBe(false);
    expect(index.presenceOf('a')?.connected).toBe(true);
    expect(index.setPresence({ ...connected('a', NOW + 1), connected: false })).toBe(true);
    expect(index.presenceOf('a')?.connected).toBe(false);
    expect(newerPresence(connected('a', NOW), connected('a', NOW + 5))).toBe(false);
    index.removePresence('a');
    expect(index.presenceOf('a')).toBeUndefined();
  });

  it('ignores the late disconnect of a connection that was already replaced', () => {
    const index = new AgentIndex();
    const onA = { ...connected('a', NOW), dispatcher_instance: 'dispatcher-A', connection_id: 'conn-1' };
    const onB = { ...connected('a', NOW + 10), dispatcher_instance: 'dispatcher-B', connection_id: 'conn-2' };
    index.setPresence(onA);
    index.setPresence(onB);
    // dispatcher A notices its old socket closed only now.
    expect(index.setPresence({ ...onA, connected: false, at: NOW + 20 })).toBe(false);
    expect(index.presenceOf('a')).toMatchObject({ connected: true, connection_id: 'conn-2' });
    // The current connection closing does count.
    expect(index.setPresence({ ...onB, connected: false, at: NOW + 30 })).toBe(true);
    expect(index.presenceOf('a')?.connected).toBe(false);
  });
});
