import { describe, expect, it } from 'vitest';
import { settlesLate } from '../../../services/dispatcher/dist/ack-journal.js';

describe('settlesLate: an ack whose DELIVERED is written at or near its budget end', () => {
  const now = 1_800_000_000_000;
  it('is late from 2 s before the budget ends (clocks of hosts differ), and after it', () => {
    expect(settlesLate(now + 1_999, now)).toBe(true);
    expect(settlesLate(now, now)).toBe(true);
    expect(settlesLate(now - 60_000, now)).toBe(true);
  });
  it('is in time with more than 2 s of budget left, or without a budget', () => {
    expect(settlesLate(now + 2_001, now)).toBe(false);
    expect(settlesLate(null, now)).toBe(false);
    expect(settlesLate(undefined, now)).toBe(false);
  });
});
