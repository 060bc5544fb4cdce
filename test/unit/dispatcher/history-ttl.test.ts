import { describe, expect, it } from 'vitest';
import { historyTtlS } from '../../../services/dispatcher/dist/failures.js';

// A message's attempt history is kept while another failure can come: to its budget's end plus
// a margin, not a day (at 3 % failures a day-long TTL held half a million histories).
describe('historyTtlS', () => {
  const now = 1_800_000_000_000;

  it('keeps a history until the budget ends, plus ten minutes', () => {
    expect(historyTtlS(now + 30_000, now)).toBe(30 + 600);
    expect(historyTtlS(now + 1_500, now)).toBe(2 + 600);
  });

  it('keeps the margin for a message already past its budget (a late answer, the stuck sweep)', () => {
    expect(historyTtlS(now - 5_000, now)).toBe(600);
  });

  it('never keeps one longer than a day, nor forever without a budget end', () => {
    expect(historyTtlS(now + 7 * 86_400_000, now)).toBe(86_400);
    expect(historyTtlS(Number.POSITIVE_INFINITY, now)).toBe(86_400);
  });
});
