import { describe, expect, it } from 'vitest';
import { FreshOffsets } from '@reach/kafka';

// A record written after this member got its partition reached no earlier owner: the router
// skips its Redis memo read for those (decision-memo.ts).
describe('FreshOffsets', () => {
  it('is fresh from the high watermark of the first batch after a join, per partition', () => {
    const fresh = new FreshOffsets();
    expect(fresh.isFresh('t', 0, '5')).toBe(false); // nothing fetched yet: maybe seen
    fresh.batch('t', 0, '10');
    expect(fresh.isFresh('t', 0, '9')).toBe(false); // in the log at the assignment
    expect(fresh.isFresh('t', 0, '10')).toBe(true);
    fresh.batch('t', 0, '50'); // later batches do not move the line
    expect(fresh.isFresh('t', 0, '20')).toBe(true);
    expect(fresh.isFresh('t', 1, '20')).toBe(false); // another partition: its own first batch
    expect(fresh.isFresh('u', 0, '20')).toBe(false);
  });

  it('forgets everything on a rejoin: the partitions may have had another owner since', () => {
    const fresh = new FreshOffsets();
    fresh.batch('t', 0, '10');
    fresh.joined();
    expect(fresh.isFresh('t', 0, '20')).toBe(false);
    fresh.batch('t', 0, '30');
    expect(fresh.isFresh('t', 0, '20')).toBe(false);
    expect(fresh.isFresh('t', 0, '30')).toBe(true);
  });
});
