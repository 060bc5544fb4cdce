import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { answerOutcome, type AnswerFrame, type Found } from '../../../services/dispatcher/dist/answer-outcome.js';
import { countsAgainstAgent } from '../../../services/dispatcher/dist/failures.js';

/**
 * What each frame finds after the frames before it, as the TAKE script and the result path
 * leave the delivery's `reach:res:` key (buffer-scripts.ts): an ack keeps the context (a
 * result may follow), a result or a reject leaves the answered marker, and a frame that finds
 * nothing (late) leaves the marker too. `start`: how the delivery stands when the first frame
 * arrives — pending, past its ack deadline (the sweeper failed the attempt), or declared DEAD.
 */
function replay(start: 'pending' | 'expired' | 'dead', frames: readonly AnswerFrame[], retryable = true) {
  let found: Found = start === 'pending' ? 'pending' : start === 'expired' ? 'gone' : 'ended';
  const tally = { delivered: 0, failed: 0, results: 0, successes: 0, failures: 0, late: 0 };
  // The missed deadline was the attempt's outcome, and a failure of the circuit (within budget).
  if (start === 'expired') {
    tally.failed++;
    tally.failures++;
  }
  for (const frame of frames) {
    const a = answerOutcome(frame, found, retryable);
    if (a.produces === 'delivered') tally.delivered++;
    if (a.produces === 'failed') tally.failed++;
    if (a.produces === 'result' || (a.produces === 'delivered' && frame === 'result')) tally.results++;
    if (a.circuit === 'success') tally.successes++;
    if (a.circuit === 'failure') tally.failures++;
    if (a.late) tally.late++;
    if (found === 'pending') found = frame === 'ack' ? 'awaiting_result' : 'answered';
    else if (found === 'awaiting_result') found = frame === 'result' ? 'answered' : 'awaiting_result';
    else found = 'answered';
  }
  return tally;
}

describe('dispatcher: one outcome per delivery, whichever frames carry it (answer-outcome.ts)', () => {
  it('the SDKs’ result then ack is one DELIVERED with its result and one circuit success, nothing late', () => {
    expect(replay('pending', ['result', 'ack'])).toEqual({ delivered: 1, failed: 0, results: 1, successes: 1, failures: 0, late: 0 });
  });

  it('ack, result alone, ack then result, and an HTTP push answered 2xx (with or without a result) count the same', () => {
    const one = { delivered: 1, failed: 0, successes: 1, failures: 0, late: 0 };
    expect(replay('pending', ['ack'])).toEqual({ ...one, results: 0 });
    expect(replay('pending', ['result'])).toEqual({ ...one, results: 1 });
    expect(replay('pending', ['ack', 'result'])).toEqual({ ...one, results: 1 });
    // Repeats re-sent after a reconnect add nothing: no second reply, no second success.
    expect(replay('pending', ['result', 'ack', 'result', 'ack'])).toEqual({ ...one, results: 1 });
  });

  it('a reject is one failed attempt; only a retryable one counts against the circuit, as Failures decides', () => {
    expect(replay('pending', ['reject'], true)).toEqual({ delivered: 0, failed: 1, results: 0, successes: 0, failures: 1, late: 0 });
    expect(replay('pending', ['reject'], false)).toEqual({ delivered: 0, failed: 1, results: 0, successes: 0, failures: 0, late: 0 });
    for (const retryable of [true, false]) {
      const counted = countsAgainstAgent({ code: 3003, failureRetryable: retryable }, null, 0);
      expect(answerOutcome('reject', 'pending', retryable).circuit).toBe(counted ? 'failure' : 'none');
    }
    expect(replay('pending', ['reject', 'ack']).late).toBe(0);
  });

  it('a retryable reject with code 2002 hands back unstarted work: retried, and nothing for the circuit', () => {
    expect(answerOutcome('reject', 'pending', true, 2002)).toEqual({ produces: 'failed', circuit: 'none', late: false });
    expect(countsAgainstAgent({ code: 3003, failureRetryable: true, handedBack: true }, null, 0)).toBe(false);
    // any other agent code on a retryable reject is still a failure
    expect(answerOutcome('reject', 'pending', true, 5002).circuit).toBe('failure');
    expect(countsAgainstAgent({ code: 3003, failureRetryable: true, handedBack: false }, null, 0)).toBe(true);
  });

  it('after the ack deadline, the failure is the outcome and the answer that follows is late once', () => {
    expect(replay('expired', ['result', 'ack'])).toEqual({ delivered: 0, failed: 1, results: 0, successes: 0, failures: 1, late: 1 });
    expect(replay('expired', ['ack', 'ack'])).toMatchObject({ successes: 0, late: 1 });
    expect(replay('dead', ['result', 'ack'])).toEqual({ delivered: 0, failed: 0, results: 0, successes: 0, failures: 0, late: 1 });
  });

  it('any sequence of frames gives at most one status, one circuit record and one late count', () => {
    const frame = fc.constantFrom<AnswerFrame>('ack', 'result', 'reject');
    fc.assert(
      fc.property(
        fc.constantFrom('pending', 'expired', 'dead' as const),
        fc.array(frame, { minLength: 1, maxLength: 8 }),
        fc.boolean(),
        (start, frames, retryable) => {
          const t = replay(start, frames, retryable);
          expect(t.delivered + t.failed).toBeLessThanOrEqual(1);
          expect(t.successes + t.failures).toBeLessThanOrEqual(1);
          expect(t.late).toBeLessThanOrEqual(1);
          expect(t.results).toBeLessThanOrEqual(1);
          // A pending delivery gets its outcome from the first frame and is never late.
          if (start === 'pending') expect(t.delivered + t.failed).toBe(1);
          if (start === 'pending') expect(t.late).toBe(0);
          if (start !== 'pending') expect(t.late).toBe(1);
        },
      ),
    );
  });
});
