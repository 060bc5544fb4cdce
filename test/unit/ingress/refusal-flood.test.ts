import { describe, expect, it } from 'vitest';
import { OVERFLOW_PRODUCER, RefusalFlood } from '../../../services/ingress/dist/refusal-flood.js';

// Issue #13: Kafka refusals are kept in full for the first few per producer, code and second;
// the rest of that second are counted into one dead letter.
const T = 1_700_000_000_000; // a whole second

describe('RefusalFlood', () => {
  it('keeps the first `sample` of a producer, code and second in full and folds the rest', () => {
    const flood = new RefusalFlood(3);
    const verdicts = Array.from({ length: 5 }, (_, i) => flood.admit('p', 1003, T + i));
    expect(verdicts).toEqual(['full', 'full', 'full', 'folded', 'folded']);
    // another code, another producer, the next second: counted apart
    expect(flood.admit('p', 4101, T)).toBe('full');
    expect(flood.admit('q', 1003, T)).toBe('full');
    expect(flood.admit('p', 1003, T + 1000)).toBe('full');
  });

  it('hands over a window only once its second is over, and only if it folded something', () => {
    const flood = new RefusalFlood(2);
    for (let i = 0; i < 5; i++) flood.admit('p', 1003, T + i);
    flood.admit('q', 1003, T);
    expect(flood.closed(T + 999)).toEqual([]);
    expect(flood.closed(T + 1000)).toEqual([{ producer: 'p', code: 1003, second: T / 1000, total: 5, folded: 3 }]);
    // at shutdown, the current second too
    expect(flood.closed(T + 999, true)).toHaveLength(1);
  });

  it('forgets ended windows once written, and keeps the current second counting', () => {
    const flood = new RefusalFlood(1);
    flood.admit('p', 1003, T);
    flood.admit('p', 1003, T);
    flood.admit('p', 1003, T + 1000);
    flood.forget(T + 1000);
    expect(flood.size).toBe(1);
    expect(flood.closed(T + 1000)).toEqual([]);
    expect(flood.admit('p', 1003, T + 1001)).toBe('folded');
    flood.forget(T + 1001, [], true);
    expect(flood.size).toBe(0);
  });

  it('bounds its memory: past 10,000 windows, new producers are counted under one overflow window', () => {
    const flood = new RefusalFlood(3);
    for (let i = 0; i < 10_000; i++) flood.admit(`p${i}`, 1003, T);
    expect(flood.admit('late-1', 1003, T)).toBe('folded');
    expect(flood.admit('late-2', 1003, T)).toBe('folded');
    expect(flood.size).toBe(10_001);
    expect(flood.closed(T + 1000)).toEqual([{ producer: OVERFLOW_PRODUCER, code: 1003, second: T / 1000, total: 5, folded: 2 }]);
  });
});
