import { describe, expect, it } from 'vitest';
import { countsAgainstAgent, isFinalRefusal } from '../../../services/dispatcher/dist/failures.js';

// Which failed attempts count against the agent's circuit. A missed ack deadline at the budget's
// end is the message running out of time (late after a broker restart, or never sent): counted,
// a broker restart under load opened every agent's circuit and the following messages were
// REJECTED 3001 (the long chaos run).
const now = 1_800_000_000_000;

describe('countsAgainstAgent', () => {
  it('counts a missed ack window, a lost connection and a retryable reject', () => {
    expect(countsAgainstAgent({ code: 3002, failureRetryable: true }, now + 5_000, now)).toBe(true);
    expect(countsAgainstAgent({ code: 3002, failureRetryable: true }, null, now)).toBe(true);
    expect(countsAgainstAgent({ code: 1002, failureRetryable: true }, now - 1, now)).toBe(true);
    expect(countsAgainstAgent({ code: 3003, failureRetryable: true }, now + 5_000, now)).toBe(true);
  });

  it('does not count a deadline missed at the budget end, a wait for a slot, or a final reject', () => {
    expect(countsAgainstAgent({ code: 3002, failureRetryable: true }, now, now)).toBe(false);
    expect(countsAgainstAgent({ code: 3002, failureRetryable: true }, now - 40, now)).toBe(false);
    expect(countsAgainstAgent({ code: 2002, failureRetryable: true }, now + 5_000, now)).toBe(false);
    expect(countsAgainstAgent({ code: 3003, failureRetryable: false }, now + 5_000, now)).toBe(false);
  });

  it("takes an agent's final reject for an answer (the circuit counts it like an ack), nothing else", () => {
    expect(isFinalRefusal({ code: 3003, failureRetryable: false })).toBe(true);
    expect(isFinalRefusal({ code: 3003, failureRetryable: true })).toBe(false);
    expect(isFinalRefusal({ code: 3002, failureRetryable: false })).toBe(false);
    expect(isFinalRefusal({ code: 1002, failureRetryable: false })).toBe(false);
    expect(isFinalRefusal({ code: 2002, failureRetryable: false })).toBe(false);
  });
});
