import { describe, expect, it } from 'vitest';
import { derivedMessageId, MESSAGE_ID_PATTERN, messageIdTime, newId, newMessageId } from '@reach/core';

const PATTERN = /^msg_[0-9A-HJKMNP-TV-Z]{26}$/;

describe('message ids', () => {
  it('are msg_ + a 26-character Crockford ULID', () => {
    for (let i = 0; i < 200; i++) expect(newMessageId()).toMatch(PATTERN);
    expect(MESSAGE_ID_PATTERN.source).toBe(PATTERN.source);
  });

  it('are unique and sort in creation order, also within one millisecond (monotonic)', () => {
    const t = Date.UTC(2025, 0, 1);
    const sameMs = Array.from({ length: 1000 }, () => newMessageId(t));
    expect(new Set(sameMs).size).toBe(sameMs.length);
    expect([...sameMs].sort()).toEqual(sameMs);
    for (let i = 1; i < sameMs.length; i++) expect(sameMs[i]! > sameMs[i - 1]!).toBe(true);
    // Across time: later ids sort after earlier ones.
    const across = [t + 1, t + 2, t + 1000, t + 86_400_000].map((ms) => newMessageId(ms));
    expect([...across].sort()).toEqual(across);
    expect(across[0]! > sameMs[sameMs.length - 1]!).toBe(true);
  });

  it('carry their creation time', () => {
    const t = Date.UTC(2030, 6, 4, 3, 2, 1, 987);
    expect(messageIdTime(newMessageId(t))).toBe(t);
    expect(messageIdTime('msg_nope')).toBeUndefined();
    expect(messageIdTime('lease_01ARZ3NDEKTSV4RRFFQ69G5FAV')).toBeUndefined();
  });

  it('other ids use their own prefix with the same ULID body', () => {
    expect(newId('lease')).toMatch(/^lease_[0-9A-HJKMNP-TV-Z]{26}$/);
  });

  it('a derived id (a fan-out copy) is the same for the same parent and subscriber, distinct otherwise, and carries the parent time', () => {
    const t = Date.UTC(2030, 6, 4, 3, 2, 1, 987);
    const parent = newMessageId(t);
    const a = derivedMessageId(parent, 'agent-a');
    expect(a).toMatch(MESSAGE_ID_PATTERN);
    expect(derivedMessageId(parent, 'agent-a')).toBe(a);
    expect(derivedMessageId(parent, 'agent-b')).not.toBe(a);
    expect(derivedMessageId(newMessageId(t), 'agent-a')).not.toBe(a);
    expect(messageIdTime(a)).toBe(t);
  });
});
